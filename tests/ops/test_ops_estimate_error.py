"""The overview says how far Lium's estimates were off over the last day: the median and 90th percentile of time
to ready taken minus estimated, over the rentals that became ready with an estimate."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from ops import overview
from rentals.states import RentalStatus

pytestmark = pytest.mark.django_db


def ready(make_rental, clock, *, estimated: int | None, taken: int, hours_ago: float = 1) -> None:  # type: ignore[no-untyped-def]
    make_rental(
        status=RentalStatus.READY,
        estimated_ready_seconds=estimated,
        ready_seconds=taken,
        ready_at=clock.now - timedelta(hours=hours_ago),
    )


def test_the_error_is_the_median_and_p90_of_taken_minus_estimated(make_rental, clock) -> None:
    # Errors -10, 0, 5, 20, 30, 40, 50, 60, 70, 300 (s): median 35, 90th percentile (nearest rank) 70.
    for estimated, taken in [(60, 50), (60, 60), (60, 65), (60, 80), (60, 90), (60, 100), (60, 110), (60, 120)]:
        ready(make_rental, clock, estimated=estimated, taken=taken)
    ready(make_rental, clock, estimated=30, taken=100)
    ready(make_rental, clock, estimated=0, taken=300)
    assert overview.estimate_error(now=clock.now) == {"count": 10, "median": 35, "p90": 70}


def test_only_the_last_days_ready_rentals_with_an_estimate_count(make_rental, clock) -> None:
    ready(make_rental, clock, estimated=60, taken=70)
    ready(make_rental, clock, estimated=60, taken=900, hours_ago=25)  # ready before the last day
    ready(make_rental, clock, estimated=None, taken=900)  # Lium gave no estimate
    make_rental(status=RentalStatus.RENTED, estimated_ready_seconds=60)  # not ready yet
    assert overview.estimate_error(now=clock.now) == {"count": 1, "median": 10, "p90": 10}


def test_the_overview_page_shows_the_figures_or_says_there_are_none(make_rental, clock, sam, client_for) -> None:
    client = client_for(sam)
    text = client.get("/ops/").content.decode()
    assert "No rental with an estimate became ready in the last 24 h." in text
    ready(make_rental, clock, estimated=60, taken=45)
    overview.cache.delete(overview.OVERVIEW_CACHE_KEY)
    text = re.sub(r"<[^>]+>", "", client.get("/ops/").content.decode())
    assert "off by a median of -15 s and -15 s at the 90th percentile" in text
