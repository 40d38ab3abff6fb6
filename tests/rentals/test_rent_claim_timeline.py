"""What a claim leaves for the operator: the timeline's record of each attempt taken, of a lease taken over from a
worker that died, and of a possibly-sent order not sent again (and why); the rental's "may have reached Lium"."""

from __future__ import annotations

import pytest

from rentals import capacity, engine
from rentals.models import Rental, RentalEvent
from rentals.states import RentalStatus
from rentals.transitions import rental_touch
from tests.rentals.fakes import Clock, FakeUpstream

pytestmark = pytest.mark.django_db


def _claims(rental: Rental) -> list[dict]:
    return [e.data for e in RentalEvent.objects.filter(rental=rental, to_status=RentalStatus.SENDING).order_by("pk")]


def test_a_second_worker_taking_over_a_dead_workers_lease_is_on_the_timeline(
    promising_backend, make_rental, clock: Clock
) -> None:
    rental = make_rental()
    assert engine.rental_claim(rental_id=rental.pk).claim is not None  # this worker dies mid-call
    clock.advance(seconds=61)
    claim = engine.rental_claim(rental_id=rental.pk).claim

    assert claim is not None
    assert _claims(rental) == [{"attempt": 1, "lease_taken_over": False}, {"attempt": 2, "lease_taken_over": True}]
    # The dead worker's call may have reached Lium: the operator's page says so, and a later "never sent"
    # answer cannot make the rental `failed`.
    assert Rental.objects.get(pk=rental.pk).possibly_sent and claim.rental.possibly_sent


def test_a_takeover_not_sent_again_says_the_worker_stopped_and_why(
    make_rental, fake_upstream: FakeUpstream, clock: Clock
) -> None:
    fake_upstream.features = []  # this backend does not promise idempotency
    rental = make_rental()
    engine.rental_claim(rental_id=rental.pk)
    clock.advance(seconds=61)

    assert engine.rental_attempt(rental_id=rental.pk) == RentalStatus.UNKNOWN
    event = RentalEvent.objects.filter(rental=rental, to_status=RentalStatus.UNKNOWN).get()
    assert event.message.startswith("Not sent again: the worker stopped during the last attempt, which may have")
    assert event.data == {"reason": "no_idempotency_promise"}


def test_a_retry_not_sent_again_names_the_earlier_attempt(
    make_rental, fake_upstream: FakeUpstream, clock: Clock
) -> None:
    fake_upstream.features = []
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=clock.now,
        last_sent_at=clock.now,
        next_attempt_at=clock.now,
        possibly_sent=True,
    )

    assert engine.rental_attempt(rental_id=rental.pk) == RentalStatus.UNKNOWN
    event = RentalEvent.objects.filter(rental=rental, to_status=RentalStatus.UNKNOWN).get()
    assert event.message.startswith("Not sent again: an earlier attempt may have reached Lium")
    assert fake_upstream.rent_requests == []


def test_a_worker_whose_rental_changed_since_it_read_it_takes_nothing(
    promising_backend, make_rental, monkeypatch: pytest.MonkeyPatch
) -> None:
    rental = make_rental()
    admit = capacity.admit

    def admit_after_another_write(read: Rental, *, now):  # type: ignore[no-untyped-def]
        # Between this worker's read and its conditional update, another writer (a second worker, a member
        # event) changes the row: the update must find nothing to take.
        rental_touch(rental_id=read.pk)
        return admit(read, now=now)

    monkeypatch.setattr(capacity, "admit", admit_after_another_write)
    assert engine.rental_claim(rental_id=rental.pk).claim is None
    rental.refresh_from_db()
    assert rental.status == RentalStatus.QUEUED and rental.attempt_count == 0 and rental.lease_token is None
    assert promising_backend.rent_requests == []
