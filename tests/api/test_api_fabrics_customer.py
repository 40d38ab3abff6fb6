"""`GET /api/v1/fabrics` and `/fabrics/nodes` list the offers of the customer the caller acts for (`customer`, an id
or a name, as `POST /rentals` takes it), read with that customer's Lium key, and say whose offers they are."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import Customer
from api.keys import api_key_create
from tests.conftest import Simulator

pytestmark = pytest.mark.django_db


def get(user, path: str, **params: str | int):  # type: ignore[no-untyped-def]
    _key, secret = api_key_create(user=user, name="k", scopes=["read"])
    return Client().get(f"/api/v1{path}", params, headers={"X-API-Key": secret})


def keys_that_listed_offers(simulator: Simulator) -> list[str]:
    """The simulator's key ids of the offer listings since this test began (each test resets its log)."""
    return [row["api_key_id"] for row in simulator.requests("offers")]


def test_the_listing_is_the_chosen_customers_by_id_or_name(dana, acme, globex, simulator: Simulator) -> None:
    by_name = get(dana, "/fabrics", customer="Globex")
    assert by_name.status_code == 200, by_name.content
    assert by_name.json()["customer"] == {"id": globex.pk, "name": "Globex"}
    by_id = get(dana, "/fabrics", customer=acme.pk).json()
    assert by_id["customer"] == {"id": acme.pk, "name": "Acme Research"}
    assert keys_that_listed_offers(simulator) == ["key-other", "key-main"]

    fabric_id = by_name.json()["fabrics"][0]["fabric_id"]
    nodes = get(dana, "/fabrics/nodes", fabric_id=fabric_id, customer="Globex")
    assert nodes.status_code == 200 and nodes.json()["customer"]["name"] == "Globex"


def test_without_a_choice_it_is_the_first_customer_and_says_so(dana, acme) -> None:
    assert get(dana, "/fabrics").json()["customer"] == {"id": acme.pk, "name": "Acme Research"}


def test_a_customer_not_yours_is_a_404_that_says_so(dana, credential, simulator: Simulator) -> None:
    Customer.objects.create(name="Initech", customer_ref="initech", default_credential=credential)
    for wanted in ("Initech", "424242", "x" * 200):
        answer = get(dana, "/fabrics", customer=wanted)
        assert answer.status_code == 404, answer.content
        error = answer.json()["error"]
        assert error["code"] == "unknown_customer" and "You do not act for a customer" in error["message"]
    assert keys_that_listed_offers(simulator) == []
