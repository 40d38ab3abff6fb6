"""Fixtures for money: a hand-moved clock, rentals that run between two times at a price, a webhook receiver.

No `__init__.py` in this folder on purpose: a `tests/billing` package would shadow the `billing` app.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from accounts.models import Customer
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus
from rentals.transitions import rental_transition
from tests.conftest import SSH_KEY
from tests.doubles import Clock
from tests.notifications.conftest import Receiver, receiver  # noqa: F401 (a fixture)

JUNE_1 = datetime(2030, 6, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def broker_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing goes to a broker here: rentals' and deliveries' enqueues are dropped (the rows are the truth)."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr("notifications.queue.delivery_enqueue", lambda *args, **kwargs: None)


@pytest.fixture
def june_clock(clock: Clock) -> Clock:
    """The root conftest's hand-moved clock, set to 1 June 2030 at 00:00 UTC (a month starts: the figures are whole)."""
    clock.now = JUNE_1
    return clock


@pytest.fixture
def make_ready_rental(alice: Any, june_clock: Clock) -> Any:
    """Return a function that makes a customer's rental at a price, moved to `ready` (billed from then) now."""
    count = [0]

    def make(customer: Customer, price: str = "10.00", pod_name: str = "") -> Rental:
        count[0] += 1
        order = RentOrder(
            fabric_id="fab-1",
            executor_ids=[f"n{count[0]}a", f"n{count[0]}b"],
            pod_name=pod_name or f"job-{count[0]}",
            public_keys=[SSH_KEY],
            price_per_hour=Decimal(price),
        )
        membership = customer.memberships.first()
        user = membership.user if membership is not None else None
        rental = rental_submit(user=user or alice, customer=customer, order=order, customer_ref=customer.customer_ref)
        for before, after in (
            (RentalStatus.QUEUED, RentalStatus.SENDING),
            (RentalStatus.SENDING, RentalStatus.RENTED),
            (RentalStatus.RENTED, RentalStatus.READY),
        ):
            assert rental_transition(rental_id=rental.pk, from_status=before, to_status=after)
        Rental.objects.filter(pk=rental.pk).update(cluster_id=f"cl-{rental.pk}")
        rental.refresh_from_db()
        return rental

    return make


def terminate(rental: Rental) -> None:
    """End a rental now: terminating, then terminated (as the pod listing would settle it)."""
    rental.refresh_from_db()
    assert rental_transition(rental_id=rental.pk, from_status=rental.status, to_status=RentalStatus.TERMINATING)
    assert rental_transition(
        rental_id=rental.pk, from_status=RentalStatus.TERMINATING, to_status=RentalStatus.TERMINATED
    )


__all__ = ["Receiver", "terminate"]
