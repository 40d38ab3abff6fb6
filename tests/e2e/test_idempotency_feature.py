"""Without `rent_idempotency` in `GET /version`, a lost answer is never followed by a re-send."""

from __future__ import annotations

import pytest

from rentals import engine, idempotency_promise
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db(transaction=True)


def submit(simulator: Simulator, alice, acme):  # type: ignore[no-untyped-def]
    offer = simulator.offers()[0]
    order = RentOrder(
        fabric_id=offer["fabric_id"],
        executor_ids=[n["id"] for n in offer["nodes"][:2]],
        pod_name="no-feature",
        public_keys=[SSH_KEY],
    )
    return rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")


def test_a_backend_without_rent_idempotency_gets_no_second_send(
    simulator: Simulator, alice, acme, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    simulator.http.post("/_sim/config", json={"features": ["rent_by_spec"]}).raise_for_status()
    simulator.faults([{"fault": "drop_after_commit", "next": 1}])
    rental = submit(simulator, alice, acme)
    assert engine.rental_attempt(rental_id=rental.pk) == "unknown"
    assert len(simulator.requests()) == 1, "never re-sent"
    rental.refresh_from_db()
    assert "does not list rent_idempotency" in rental.events.last().message


def test_a_backend_with_rent_idempotency_gets_the_same_order_again(
    simulator: Simulator, alice, acme, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    simulator.faults([{"fault": "drop_after_commit", "next": 1}])
    rental = submit(simulator, alice, acme)
    assert engine.rental_attempt(rental_id=rental.pk) == "retrying"
    assert idempotency_promise.upstream_promises_idempotency(rental.credential) is True
