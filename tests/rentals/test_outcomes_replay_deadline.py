"""An operator's replay retries up to 23 h after the first send, never past it, whatever `retry_until` says.

The upstream keeps an idempotency key for 24 h; a re-send after that is a second rent. A replay sets
`retry_until`, so the engine may retry beyond RENT_RETRY_WINDOW (2 h here), but `rentals.outcomes.retry_deadline`
caps it at the first send + 23 h. The clock is moved by hand; nothing waits.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from ops import services as ops_services
from rentals import tasks
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, FakeUpstream, error

pytestmark = pytest.mark.django_db


def attempt(rental: Rental, capture) -> None:  # type: ignore[no-untyped-def]
    """Run one `rental_send` as a worker would."""
    with capture(execute=False):
        tasks.rental_send(rental.pk)
    rental.refresh_from_db()


def unknown_since(make_rental, clock: Clock, hours: float) -> Rental:  # type: ignore[no-untyped-def]
    """An outcome-unknown rental whose first (possibly delivered) send was `hours` ago."""
    first = clock.now - timedelta(hours=hours)
    return make_rental(
        status=RentalStatus.UNKNOWN, attempt_count=1, first_sent_at=first, last_sent_at=first, possibly_sent=True
    )


def test_a_replay_three_hours_after_the_first_send_keeps_retrying_past_the_settings_window(
    promising_backend: FakeUpstream, make_rental, olga, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = unknown_since(make_rental, clock, hours=3)  # RENT_RETRY_WINDOW (2 h) is over, 23 h is not
    ops_services.ops_retry_now(rental=rental, actor=olga, reason="Lium says the request never arrived")
    promising_backend.script = [error(503)]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.RETRYING, "the replay goes on retrying inside the 23 h"
    assert rental.next_attempt_at is not None and rental.next_attempt_at > clock.now
    assert len(promising_backend.rent_requests) == 1


def test_a_replay_whose_next_retry_would_fall_past_23_hours_stops_as_unknown(
    promising_backend: FakeUpstream, make_rental, olga, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = unknown_since(make_rental, clock, hours=22)
    ops_services.ops_retry_now(rental=rental, actor=olga, reason="one more try")
    promising_backend.script = [error(503)]
    # The workers were down: the replay's message is taken 59 min 59 s later, one second inside the 23 h.
    clock.advance(minutes=59, seconds=59)

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.UNKNOWN, "no retry is scheduled past the key window"
    assert rental.next_attempt_at is None
    assert "retry window is over" in rental.events.order_by("-pk").first().message  # type: ignore[union-attr]


def test_a_retry_until_set_past_23_hours_is_still_cut_at_23_hours(
    promising_backend: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    # However `retry_until` came to be later (the admin, an older release), the key window wins.
    first = clock.now - timedelta(hours=22, minutes=59, seconds=59)
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=first,
        last_sent_at=first,
        possibly_sent=True,
        next_attempt_at=clock.now,
        retry_until=first + timedelta(hours=30),
    )
    promising_backend.script = [error(503)]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.UNKNOWN
    assert len(promising_backend.rent_requests) == 1


def test_the_operator_page_shows_the_replay_deadline_at_23_hours(
    make_rental, olga, clock: Clock, client_for, enqueued
) -> None:
    rental = unknown_since(make_rental, clock, hours=3)
    deadline = clock.now - timedelta(hours=3) + timedelta(hours=23)
    Rental.objects.filter(pk=rental.pk).update(status=RentalStatus.RETRYING, retry_until=deadline)

    page = client_for(olga).get(f"/ops/rentals/{rental.public_id}/")

    assert page.status_code == 200
    assert f"Automatic retries until</dt><dd>{deadline:%Y-%m-%d %H:%M} UTC (20 h" in page.content.decode()
