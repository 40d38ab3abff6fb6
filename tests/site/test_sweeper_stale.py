"""One rule for "the sweeper is stale" (`rentals.heartbeats`): six missed runs and at least a minute. The
readiness probe and the ops overview say the same thing for the same heartbeat."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.health import sweeper_check
from ops.overview import worker_health
from rentals.heartbeats import SWEEPER_HEARTBEAT, sweeper_last_run
from rentals.models import Heartbeat

pytestmark = pytest.mark.django_db


def ran(seconds_ago: float) -> None:
    Heartbeat.objects.update_or_create(
        name=SWEEPER_HEARTBEAT, defaults={"at": timezone.now() - timedelta(seconds=seconds_ago)}
    )


@pytest.mark.parametrize(
    ("interval", "seconds_ago", "stale"),
    [
        (30, 170, False),  # under six runs of 30 s
        (30, 190, True),  # over six runs
        (5, 50, False),  # six runs of 5 s is 30 s, but a minute at least
        (5, 70, True),
    ],
)
def test_the_sweeper_is_stale_after_six_missed_runs_and_at_least_a_minute(
    settings, interval: int, seconds_ago: int, stale: bool
) -> None:
    settings.SWEEP_INTERVAL_SECONDS = interval
    ran(seconds_ago)
    assert sweeper_last_run(now=timezone.now()).stale is stale
    problem = sweeper_check()
    assert (problem is not None) is stale
    if stale:
        assert problem == f"sweeper: last ran {seconds_ago} s ago"
    assert worker_health(now=timezone.now())["sweeper_stale"] is stale, "the overview agrees with the probe"


def test_a_sweeper_that_never_ran_is_stale_everywhere() -> None:
    assert sweeper_last_run(now=timezone.now()).at is None
    assert sweeper_check() == "sweeper: has never run"
    assert worker_health(now=timezone.now())["sweeper_stale"] is True


def test_the_overview_flags_a_stale_sweeper(settings, sam, client_for) -> None:
    settings.SWEEP_INTERVAL_SECONDS = 5
    ran(70)
    assert "stale: is beat running?" in client_for(sam).get("/ops/").content.decode()
