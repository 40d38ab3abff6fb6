"""When the next retry is scheduled, and what the timeline says about it (a moved clock, jitter pinned).

The delay is the backoff (never shorter than the answer's Retry-After); a retry that falls exactly at the end
of the window is still made, one a moment later is not.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from common import backoff
from rentals import tasks
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, FakeUpstream, error

pytestmark = pytest.mark.django_db


@pytest.fixture
def lowest_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the bottom of the jitter range: the delay is half the backoff ceiling."""
    monkeypatch.setattr(backoff.random, "uniform", lambda low, high: low)


@pytest.fixture
def highest_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the top of the jitter range: the delay is the backoff ceiling, base * 2 ** (n - 1)."""
    monkeypatch.setattr(backoff.random, "uniform", lambda low, high: high)


def attempt(rental: Rental, capture) -> None:  # type: ignore[no-untyped-def]
    with capture(execute=False):
        tasks.rental_send(rental.pk)
    rental.refresh_from_db()


def test_without_retry_after_the_next_try_waits_the_backoff_alone(
    promising_backend: FakeUpstream,
    make_rental,
    engine_settings,
    clock: Clock,
    lowest_jitter,
    django_capture_on_commit_callbacks,
) -> None:
    engine_settings.RENT_BACKOFF_BASE_SECONDS = 0.5
    rental = make_rental()
    promising_backend.script = [error(503, message="Scheduler restarting")]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.next_attempt_at == clock.now + timedelta(seconds=0.25)
    event = rental.events.order_by("-pk").first()
    assert event is not None and event.message.startswith("Scheduler restarting Retrying in 0 s with the same key")


def test_a_retry_due_exactly_at_the_end_of_the_window_is_made_one_past_it_is_not(
    promising_backend: FakeUpstream,
    make_rental,
    engine_settings,
    clock: Clock,
    highest_jitter,
    django_capture_on_commit_callbacks,
) -> None:
    # Attempt 2 waits 4 s (base 2 s, doubled once): the window (2 h) ends exactly then.
    first = clock.now - engine_settings.RENT_RETRY_WINDOW + timedelta(seconds=4)
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=first,
        last_sent_at=first,
        possibly_sent=True,
        next_attempt_at=clock.now,
    )
    promising_backend.script = [error(503), error(503)]

    attempt(rental, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.RETRYING
    assert rental.next_attempt_at == first + engine_settings.RENT_RETRY_WINDOW

    clock.now = rental.next_attempt_at  # attempt 3 would wait 8 s, past the window
    attempt(rental, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.UNKNOWN
