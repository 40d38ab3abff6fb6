"""`POST /api/v1/rentals/{id}/terminate` before the cluster's id is known: a 409 `cluster_not_known_yet` that says
what to do (wait for the nodes, or, once they are overdue, have support reconcile), and the docs list it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY

pytestmark = pytest.mark.django_db


@pytest.fixture
def rented(alice, acme, settings, monkeypatch):  # type: ignore[no-untyped-def]
    """Return a function making alice's rental `rented` some minutes ago, no member, no cluster id."""
    settings.RENT_MEMBERS_GRACE_SECONDS = 600
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)

    def make(minutes_ago: int) -> Rental:
        order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name="job", public_keys=[SSH_KEY])
        rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
        rented_at = timezone.now() - timedelta(minutes=minutes_ago)
        Rental.objects.filter(pk=rental.pk).update(status="rented", rented_at=rented_at, cluster_id="")
        return rental

    return make


def terminate(user, rental: Rental) -> dict:  # type: ignore[no-untyped-def, type-arg]
    _key, secret = api_key_create(user=user, name="k", scopes=["read", "manage"])
    answer = Client().post(f"/api/v1/rentals/{rental.public_id}/terminate", headers={"X-API-Key": secret})
    assert answer.status_code == 409, answer.content
    error = answer.json()["error"]
    assert error["code"] == "cluster_not_known_yet"
    rental.refresh_from_db()
    assert rental.status == "rented", "nothing was terminated"
    return error  # type: ignore[no-any-return]


def test_while_the_nodes_may_still_appear_it_says_to_wait_for_them(rented, alice) -> None:
    error = terminate(alice, rented(2))
    assert "wait until its nodes appear" in error["message"]
    assert "within 10 min" in error["hint"] and "cluster_id" in error["hint"]
    assert "Try again in a minute." not in error["hint"]


def test_once_the_nodes_are_overdue_it_says_support_can_reconcile(rented, alice) -> None:
    rental = rented(11)
    error = terminate(alice, rental)
    assert "ask support to reconcile" in error["message"]
    assert "Support has been alerted" in error["hint"] and str(rental.idempotency_key) in error["hint"]


def test_the_api_docs_list_the_answer(client) -> None:  # type: ignore[no-untyped-def]
    schema = client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/rentals/{rental_id}/terminate"]["post"]
    assert "cluster_not_known_yet" in operation["description"]
