"""The rent task delivered twice (a worker died mid-call, the broker redelivered) never rents twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from rentals import engine, tasks, upstream
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db(transaction=True)


def submit(simulator: Simulator, alice, acme) -> Rental:  # type: ignore[no-untyped-def]
    offer = simulator.offers()[0]
    order = RentOrder(
        fabric_id=offer["fabric_id"],
        executor_ids=[node["id"] for node in offer["nodes"][:2]],
        pod_name="redelivered",
        public_keys=[SSH_KEY],
    )
    return rental_submit(user=alice, customer=acme, order=order, customer_ref=acme.customer_ref)


def test_a_redelivered_task_resends_the_same_key_and_bytes_and_one_cluster_exists(
    simulator: Simulator, alice, acme, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)
    rental = submit(simulator, alice, acme)

    # The first worker claims the rental and sends it, then dies before recording the answer.
    claim = engine.rental_claim(rental_id=rental.pk).claim
    assert claim is not None
    first = upstream.client_for(rental.credential).rent_cluster(
        body=bytes(claim.rental.request_body),
        idempotency_key=str(rental.idempotency_key),
        customer_ref=rental.customer_ref,
    )
    assert first.classification == "confirmed"
    # Its lease runs out; the broker delivers the same task again, twice.
    Rental.objects.filter(pk=rental.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert tasks.rental_send(rental.pk) == "rented"
    assert tasks.rental_send(rental.pk) is None, "a duplicate delivery finds nothing to do"

    rental.refresh_from_db()
    assert rental.status == "rented" and rental.replayed
    sent = simulator.requests()
    assert [r["idempotency_key"] for r in sent] == [str(rental.idempotency_key)] * 2
    assert {r["body_sha256"] for r in sent} == {rental.body_sha256}
    assert sent[1]["replayed"] is True
    assert len(simulator.ledger()) == 1
    attempts = list(rental.attempts.values_list("number", "classification"))
    assert attempts == [(1, "inconclusive"), (2, "confirmed")], "the lost attempt is on record"
