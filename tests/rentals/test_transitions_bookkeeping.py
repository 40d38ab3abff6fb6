"""What the one writer (`rentals/transitions.py`) sets, refuses and bumps, as the operator and the page see it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from ops import services as ops_services
from rentals.models import Rental, RentalEvent
from rentals.states import RentalStatus
from rentals.transitions import rental_touch, rental_transition
from tests.rentals.fakes import Clock

pytestmark = pytest.mark.django_db


def test_a_rental_settled_out_of_unknown_has_no_automatic_look_left(make_rental) -> None:  # type: ignore[no-untyped-def]
    rental = make_rental(status=RentalStatus.SENDING)
    assert rental_transition(rental_id=rental.pk, from_status=RentalStatus.SENDING, to_status=RentalStatus.UNKNOWN)
    rental.refresh_from_db()
    assert rental.next_reconcile_at is not None, "entering unknown schedules the engine's first look"

    assert rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.UNKNOWN,
        to_status=RentalStatus.NOT_RENTED,
        message="Support found no cluster.",
    )
    rental.refresh_from_db()
    assert rental.next_reconcile_at is None, "a settled rental shows no look still to come"


def test_retry_now_on_a_rental_a_worker_took_meanwhile_changes_nothing(  # type: ignore[no-untyped-def]
    make_rental, olga, clock: Clock
) -> None:
    later = clock.now + timedelta(minutes=2)
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=clock.now - timedelta(minutes=3),
        next_attempt_at=later,
    )
    page = Rental.objects.get(pk=rental.pk)  # what the operator's page was built from
    assert rental_transition(rental_id=rental.pk, from_status=RentalStatus.RETRYING, to_status=RentalStatus.SENDING)

    with pytest.raises(ValidationError, match="changed meanwhile"):
        ops_services.ops_retry_now(rental=page, actor=olga, reason="the customer is waiting")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.SENDING and rental.next_attempt_at == later
    assert not RentalEvent.objects.filter(rental=rental, kind=RentalEvent.Kind.STAFF_ACTION).exists(), "no staff action"


def test_a_touch_gives_the_page_a_new_version_to_fetch(make_rental, clock: Clock) -> None:  # type: ignore[no-untyped-def]
    rental = make_rental(status=RentalStatus.READY)
    # An open page polls with the version it shows and fetches the rental again only when it differs.
    assert rental_touch(rental_id=rental.pk, removal_scheduled_at=clock.now + timedelta(hours=1))
    assert Rental.objects.get(pk=rental.pk).version == rental.version + 1
    assert not rental_touch(rental_id=rental.pk + 1000), "no such rental: nothing changed"
