"""A possibly-sent order is sent again only to a backend that promises idempotency, on every path.

The guard sits in the claim, which every send goes through: an operator's replay, a retry, a lease
takeover after a worker died. Without `rent_idempotency` in `GET /version` a repeat could rent twice.
"""

from __future__ import annotations

import httpx
import pytest
from django.core.exceptions import ValidationError

from ops import services as ops_services
from rentals import engine, tasks
from rentals.models import Rental, RentalEvent, RentAttempt
from rentals.states import RentalStatus, can_transition
from rentals.transitions import rental_transition
from rentals.upstream import Classification as C
from tests.rentals.fakes import Clock, FakeUpstream, rented

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_promise(fake_upstream: FakeUpstream) -> None:
    """This backend's `GET /version` does not list rent_idempotency (the fake's default, said out loud)."""
    fake_upstream.features = []


def send(rental: Rental, capture) -> str | None:  # type: ignore[no-untyped-def]
    with capture(execute=True):
        status = tasks.rental_send(rental.pk)
    rental.refresh_from_db()
    return status


def test_an_operator_replay_of_an_unknown_rental_is_refused_without_the_promise(
    make_rental, fake_upstream: FakeUpstream, olga, no_promise, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ReadTimeout("read timed out"), rented()]
    assert send(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN

    with pytest.raises(ValidationError, match="does not promise idempotency"):
        ops_services.ops_retry_now(rental=rental, actor=olga, reason="customer is waiting")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.UNKNOWN
    assert len(fake_upstream.rent_requests) == 1, "the same key was not sent a second time"


def test_a_replay_that_reaches_a_worker_anyway_is_not_sent_without_the_promise(
    make_rental, fake_upstream: FakeUpstream, olga, no_promise, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ReadTimeout("read timed out"), rented()]
    assert send(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN
    # Any path that makes it due again (an older page, the admin, a script) still meets the claim's guard.
    rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.UNKNOWN,
        to_status=RentalStatus.RETRYING,
        next_attempt_at=rental.updated_at,
    )
    assert send(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN
    assert len(fake_upstream.rent_requests) == 1
    assert rental.status == RentalStatus.UNKNOWN and rental.attempt_count == 1
    assert "does not promise idempotency" in rental.events.filter(to_status=RentalStatus.UNKNOWN).last().message


def test_a_lease_takeover_does_not_resend_without_the_promise(
    make_rental, fake_upstream: FakeUpstream, clock: Clock, no_promise, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    assert engine.rental_claim(rental_id=rental.pk).claim is not None  # this worker dies mid-call
    clock.advance(seconds=61)

    assert send(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN
    assert fake_upstream.rent_requests == []
    assert rental.status == RentalStatus.UNKNOWN and rental.possibly_sent and rental.lease_token is None
    lost = RentAttempt.objects.get(rental=rental)
    assert (lost.number, lost.classification) == (1, C.INCONCLUSIVE)
    event = rental.events.filter(to_status=RentalStatus.UNKNOWN).get()
    assert event.from_status == RentalStatus.SENDING and "does not promise idempotency" in event.message


def test_a_retry_of_a_possibly_sent_order_is_not_sent_once_the_promise_is_gone(
    make_rental, fake_upstream: FakeUpstream, clock: Clock, no_promise
) -> None:
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=clock.now,
        next_attempt_at=clock.now,
        possibly_sent=True,
    )
    assert engine.rental_claim(rental_id=rental.pk).claim is None
    assert engine.rental_attempt(rental_id=rental.pk) is None, "already settled by the claim"
    rental.refresh_from_db()
    assert rental.status == RentalStatus.UNKNOWN and fake_upstream.rent_requests == []


def test_a_retry_of_an_order_that_never_reached_lium_is_sent_without_the_promise(
    make_rental, fake_upstream: FakeUpstream, clock: Clock, no_promise, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=clock.now,
        next_attempt_at=clock.now,
        possibly_sent=False,
    )
    fake_upstream.script = [rented()]
    assert send(rental, django_capture_on_commit_callbacks) == RentalStatus.RENTED
    assert len(fake_upstream.rent_requests) == 1


def test_a_lease_takeover_with_the_promise_is_a_listed_sending_to_sending_transition(
    promising_backend, make_rental, clock: Clock
) -> None:
    rental = make_rental()
    dead = engine.rental_claim(rental_id=rental.pk).claim
    clock.advance(seconds=61)
    claim = engine.rental_claim(rental_id=rental.pk).claim
    assert dead is not None and claim is not None and claim.number == 2
    assert can_transition(RentalStatus.SENDING, RentalStatus.SENDING), "the takeover is a listed transition"
    takeover = RentalEvent.objects.filter(
        rental=rental, from_status=RentalStatus.SENDING, to_status=RentalStatus.SENDING
    ).get()
    assert "Attempt 2" in takeover.message
    assert Rental.objects.get(pk=rental.pk).version == claim.rental.version


def test_the_attempt_returns_unknown_when_its_claim_settles_a_takeover(
    make_rental, fake_upstream: FakeUpstream, clock: Clock, no_promise
) -> None:
    rental = make_rental()
    engine.rental_claim(rental_id=rental.pk)
    clock.advance(seconds=61)
    assert engine.rental_attempt(rental_id=rental.pk) == RentalStatus.UNKNOWN
    assert fake_upstream.rent_requests == []
