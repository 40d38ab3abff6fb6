"""`GET /api/v1/fabrics` and `/fabrics/nodes` list the offers of the customer the caller acts for (`customer`, an id
or a name, as `POST /rentals` takes it), read with that customer's Lium key, and say whose offers they are."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import Customer, Membership, UpstreamCredential
from api.keys import api_key_create
from tests.conftest import Simulator, _user

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(simulator: Simulator, acme, globex):  # type: ignore[no-untyped-def]
    """A member of Acme (the simulator's main key) and of Globex, which rents on another Lium account."""
    other = UpstreamCredential(name="other", base_url=simulator.api_url)
    other.set_secret("sim-other-key")
    other.save()
    Customer.objects.filter(pk=globex.pk).update(default_credential=other)
    user = _user("dana", customer=acme)
    Membership.objects.create(user=user, customer=globex)
    return user


def get(user, path: str, **params: str | int):  # type: ignore[no-untyped-def]
    _key, secret = api_key_create(user=user, name="k", scopes=["read"])
    return Client().get(f"/api/v1{path}", params, headers={"X-API-Key": secret})


def keys_since(simulator: Simulator, since: int) -> list[str]:
    rows = simulator.http.get("/_sim/requests", params={"route": "offers"}).raise_for_status().json()
    return [row["api_key_id"] for row in rows[since:]]


def offer_calls(simulator: Simulator) -> int:
    return len(simulator.http.get("/_sim/requests", params={"route": "offers"}).json())


def test_the_listing_is_the_chosen_customers_by_id_or_name(dana, acme, globex, simulator: Simulator) -> None:
    before = offer_calls(simulator)
    by_name = get(dana, "/fabrics", customer="Globex")
    assert by_name.status_code == 200, by_name.content
    assert by_name.json()["customer"] == {"id": globex.pk, "name": "Globex"}
    by_id = get(dana, "/fabrics", customer=acme.pk).json()
    assert by_id["customer"] == {"id": acme.pk, "name": "Acme Research"}
    assert keys_since(simulator, before) == ["key-other", "key-main"]

    fabric_id = by_name.json()["fabrics"][0]["fabric_id"]
    nodes = get(dana, "/fabrics/nodes", fabric_id=fabric_id, customer="Globex")
    assert nodes.status_code == 200 and nodes.json()["customer"]["name"] == "Globex"


def test_without_a_choice_it_is_the_first_customer_and_says_so(dana, acme) -> None:
    assert get(dana, "/fabrics").json()["customer"] == {"id": acme.pk, "name": "Acme Research"}


def test_a_customer_not_yours_is_a_404_that_says_so(dana, credential, simulator: Simulator) -> None:
    Customer.objects.create(name="Initech", customer_ref="initech", default_credential=credential)
    before = offer_calls(simulator)
    for wanted in ("Initech", "424242", "x" * 200):
        answer = get(dana, "/fabrics", customer=wanted)
        assert answer.status_code == 404, answer.content
        error = answer.json()["error"]
        assert error["code"] == "unknown_customer" and "You do not act for a customer" in error["message"]
    assert keys_since(simulator, before) == []
