"""Every (from, to) pair of rental states: the allowed ones move the row and leave an event, the others raise."""

from __future__ import annotations

import itertools

import pytest

from rentals.models import Rental, RentalEvent
from rentals.states import TRANSITIONS, RentalStatus, can_transition
from rentals.transitions import IllegalTransition, rental_transition

pytestmark = pytest.mark.django_db

ALL_PAIRS = list(itertools.product(RentalStatus.values, RentalStatus.values))
ALLOWED = {(a, b) for a, b in ALL_PAIRS if can_transition(a, b)}

# The design's state diagram, written out independently of `TRANSITIONS`, so a change there is noticed.
EXPECTED_ALLOWED = {
    (RentalStatus.SCHEDULED, RentalStatus.QUEUED),  # its start time came: sent through the normal engine
    (RentalStatus.SCHEDULED, RentalStatus.CANCELLED),
    (RentalStatus.SCHEDULED, RentalStatus.REFUSED),  # its nodes are gone, or a budget or quota refuses it then
    (RentalStatus.QUEUED, RentalStatus.SENDING),
    (RentalStatus.QUEUED, RentalStatus.CANCELLED),
    (RentalStatus.QUEUED, RentalStatus.REFUSED),  # Lium's cluster switch stayed off past the wait: never sent
    (RentalStatus.SENDING, RentalStatus.RENTED),
    (RentalStatus.SENDING, RentalStatus.REFUSED),
    (RentalStatus.SENDING, RentalStatus.SENDING),  # a worker takes over the expired lease of one that died
    (RentalStatus.SENDING, RentalStatus.RETRYING),
    (RentalStatus.SENDING, RentalStatus.UNKNOWN),
    (RentalStatus.SENDING, RentalStatus.FAILED),
    (RentalStatus.RETRYING, RentalStatus.SENDING),
    (RentalStatus.RETRYING, RentalStatus.UNKNOWN),
    (RentalStatus.RETRYING, RentalStatus.FAILED),
    (RentalStatus.RENTED, RentalStatus.READY),
    (RentalStatus.RENTED, RentalStatus.DEGRADED),
    (RentalStatus.RENTED, RentalStatus.TERMINATING),
    # Issue 27: a verified rental is checked before it is ready.
    (RentalStatus.RENTED, RentalStatus.VERIFYING),
    (RentalStatus.VERIFYING, RentalStatus.READY),
    (RentalStatus.VERIFYING, RentalStatus.CHECK_FAILED),
    (RentalStatus.VERIFYING, RentalStatus.DEGRADED),
    (RentalStatus.VERIFYING, RentalStatus.TERMINATING),
    (RentalStatus.CHECK_FAILED, RentalStatus.READY),  # kept as it is, unverified
    (RentalStatus.CHECK_FAILED, RentalStatus.DEGRADED),
    (RentalStatus.CHECK_FAILED, RentalStatus.TERMINATING),
    (RentalStatus.READY, RentalStatus.DEGRADED),
    (RentalStatus.READY, RentalStatus.TERMINATING),
    (RentalStatus.DEGRADED, RentalStatus.READY),
    (RentalStatus.DEGRADED, RentalStatus.TERMINATING),
    (RentalStatus.UNKNOWN, RentalStatus.SENDING),
    (RentalStatus.UNKNOWN, RentalStatus.RETRYING),  # an operator replays the stored order (same key) inside the window
    (RentalStatus.UNKNOWN, RentalStatus.RENTED),
    (RentalStatus.UNKNOWN, RentalStatus.NOT_RENTED),
    (RentalStatus.TERMINATING, RentalStatus.TERMINATED),
    (RentalStatus.TERMINATING, RentalStatus.READY),
    (RentalStatus.TERMINATING, RentalStatus.DEGRADED),
    (RentalStatus.TERMINATING, RentalStatus.CHECK_FAILED),  # a refused delete of a cluster whose check failed
}


def test_the_transition_table_is_the_designed_state_machine() -> None:
    assert ALLOWED == EXPECTED_ALLOWED
    assert set(TRANSITIONS) == set(RentalStatus.values), "every state has an entry"


@pytest.mark.parametrize(
    "final",
    [
        RentalStatus.REFUSED,
        RentalStatus.FAILED,
        RentalStatus.NOT_RENTED,
        RentalStatus.CANCELLED,
        RentalStatus.TERMINATED,
    ],
)
def test_final_states_lead_nowhere(final: str) -> None:
    assert not any(can_transition(final, to) for to in RentalStatus.values)


@pytest.mark.parametrize(("from_status", "to_status"), sorted(ALLOWED))
def test_an_allowed_transition_moves_the_row_and_records_the_event(make_rental, from_status, to_status) -> None:
    rental = make_rental(status=from_status)
    version = rental.version
    assert rental_transition(rental_id=rental.pk, from_status=from_status, to_status=to_status, message="why")
    rental.refresh_from_db()
    assert rental.status == to_status and rental.version == version + 1
    event = rental.events.filter(kind=RentalEvent.Kind.STATE).last()
    assert (event.from_status, event.to_status, event.message) == (from_status, to_status, "why")


@pytest.mark.parametrize(("from_status", "to_status"), sorted(set(ALL_PAIRS) - ALLOWED))
def test_an_illegal_transition_raises_and_changes_nothing(make_rental, from_status, to_status) -> None:
    rental = make_rental(status=from_status)
    events = rental.events.count()
    with pytest.raises(IllegalTransition):
        rental_transition(rental_id=rental.pk, from_status=from_status, to_status=to_status)
    rental.refresh_from_db()
    assert rental.status == from_status and rental.events.count() == events


def test_a_transition_from_a_state_the_row_is_no_longer_in_does_nothing(make_rental) -> None:
    rental = make_rental(status=RentalStatus.RETRYING)
    # Another worker already took it: this caller's idea of the state is stale.
    assert (
        rental_transition(rental_id=rental.pk, from_status=RentalStatus.QUEUED, to_status=RentalStatus.CANCELLED)
        is False
    )
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RETRYING
    assert not rental.events.filter(to_status=RentalStatus.CANCELLED).exists()


def test_only_the_lease_holder_settles_a_sending_rental(make_rental) -> None:
    import uuid

    holder, stranger = uuid.uuid4(), uuid.uuid4()
    rental = make_rental(status=RentalStatus.SENDING, lease_token=holder)
    assert not rental_transition(
        rental_id=rental.pk, from_status=RentalStatus.SENDING, to_status=RentalStatus.RENTED, expect_lease=stranger
    )
    assert Rental.objects.get(pk=rental.pk).status == RentalStatus.SENDING
    assert rental_transition(
        rental_id=rental.pk, from_status=RentalStatus.SENDING, to_status=RentalStatus.RENTED, expect_lease=holder
    )
    assert Rental.objects.get(pk=rental.pk).status == RentalStatus.RENTED
