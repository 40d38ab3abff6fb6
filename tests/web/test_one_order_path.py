"""The rent form and the JSON API build an order one way (`rentals.orders.order`): same nodes, same order."""

from __future__ import annotations

import re
import time
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from api.keys import api_key_create
from billing.models import CustomerQuota
from rentals.models import Rental
from rentals.offers import OfferListing, Template
from rentals.orders.order import RentOrder, rental_order_build
from rentals.upstream.parse_offers import Fabric
from tests.conftest import SSH_KEY
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db

NODES = [node("n-1", "2.00"), node("n-2", "1.50"), node("n-3", "3.00")]


@pytest.fixture
def fake_offers(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_fakes.install(monkeypatch, lambda credential: NODES)
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)


def found(pattern: str, html: str) -> str:
    match = re.search(pattern, html)
    assert match is not None, pattern
    return match.group(1)


def form_for(client: Client) -> dict[str, Any]:
    """Return the rent form as the page offers it, with nodes n-2 and n-1 picked."""
    html = client.get("/rent/", {"fabric": FABRIC}).content.decode()
    return {
        "fabric": FABRIC,
        "customer": found(r'name="customer"[^>]*>\s*<option value="([^"]+)"', html),
        "submit_token": found(r'name="submit_token" value="([^"]+)"', html),
        "template_id": found(r'<option value="([^"]+)" selected>', html),
        "executor_ids": ["n-2", "n-1"],
        "pod_name": "train-1",
        "ssh_public_keys": SSH_KEY,
        "enable_volume_encryption": "on",
        "enable_backups": "on",
    }


def test_the_form_and_the_api_save_the_same_order_for_the_same_choice(fake_offers, alice, client_for) -> None:
    client = client_for(alice)
    assert client.post(f"/rent/?fabric={FABRIC}", form_for(client)).status_code == 302
    _key, secret = api_key_create(user=alice, name="k", scopes=["read", "rent"])
    body = {"fabric_id": FABRIC, "executor_ids": ["n-2", "n-1"], "pod_name": "train-1", "ssh_public_keys": [SSH_KEY]}
    answer = Client().post("/api/v1/rentals", body, content_type="application/json", headers={"X-API-Key": secret})
    assert answer.status_code == 201, answer.content

    by_form, by_api = Rental.objects.order_by("id")
    assert by_form.request_body == by_api.request_body, "the same bytes go upstream, template defaulted alike"
    assert b'"template_id":"tpl-main"' in by_api.request_body
    for rental in (by_form, by_api):
        assert (rental.gpu_type, rental.gpus_per_node, rental.price_per_hour) == ("H100", 8, Decimal("28.00"))


def test_the_form_and_the_api_refuse_an_order_in_the_same_words(fake_offers, alice, acme, client_for) -> None:
    CustomerQuota.objects.create(customer=acme, max_hourly_usd=Decimal("1.00"))
    client = client_for(alice)
    page = client.post(f"/rent/?fabric={FABRIC}", {**form_for(client), "executor_ids": ["n-1", "gone"]})
    _key, secret = api_key_create(user=alice, name="k", scopes=["read", "rent"])
    body = {"fabric_id": FABRIC, "executor_ids": ["n-1", "gone"], "pod_name": "train-1", "ssh_public_keys": [SSH_KEY]}
    api = Client().post("/api/v1/rentals", body, content_type="application/json", headers={"X-API-Key": secret})
    [error] = api.json()["validation_errors"]
    assert (api.status_code, error["field"]) == (422, "executor_ids")
    assert error["message"] in page.content.decode(), "the form shows the API's message"

    page = client.post(f"/rent/?fabric={FABRIC}", form_for(client))
    api = Client().post(
        "/api/v1/rentals",
        {**body, "executor_ids": ["n-2", "n-1"]},
        content_type="application/json",
        headers={"X-API-Key": secret},
    )
    assert (api.status_code, api.json()["error"]["code"]) == (422, "quota_exceeded")
    assert api.json()["message"] in page.content.decode().replace("&#x27;", "'")
    assert not Rental.objects.exists()


def listing() -> OfferListing:
    fabric = Fabric(FABRIC, "infiniband", "400G", True, 3, NODES)
    return OfferListing(fabrics=[fabric], fetched_at=time.time())


def build(**choices: Any) -> RentOrder:
    offered = listing()
    templates = [Template(id="new", name="c", image="i", tag="2"), Template(id="old", name="c", image="i", tag="1")]
    fields = {"pod_name": "job", "public_keys": [SSH_KEY], **choices}
    return rental_order_build(fabric=offered.fabrics[0], listing=offered, templates=templates, **fields)


def test_an_order_takes_the_cheapest_nodes_and_the_newest_template_unless_told() -> None:
    order = build(node_count=2)
    assert order.executor_ids == ["n-2", "n-1"] and order.template_id == "new"
    assert build(executor_ids=["n-1", "n-3"], template_id="old").template_id == "old"


@pytest.mark.parametrize(
    ("choices", "field", "code"),
    [
        ({"executor_ids": ["n-1", "gone"]}, "executor_ids", "node_not_free"),
        ({"executor_ids": ["n-1"]}, "executor_ids", "too_few_nodes"),
        ({"node_count": 4}, "node_count", "not_enough_nodes"),
        ({"executor_ids": ["n-1", "n-2"], "template_id": "nope"}, "template_id", "unknown_template"),
    ],
)
def test_a_refusal_names_the_field_at_fault(choices: dict, field: str, code: str) -> None:
    with pytest.raises(ValidationError) as refused:
        build(**choices)
    [error] = refused.value.error_dict[field]
    assert error.code == code


def test_a_form_token_someone_else_used_never_hands_over_their_rental(fake_offers, alice, bob, client_for) -> None:
    # bob's form token in alice's post (copied, or a collision): alice is told to reload, bob's rental stays his.
    bobs = client_for(bob)
    bobs_form = form_for(bobs)
    assert bobs.post(f"/rent/?fabric={FABRIC}", bobs_form).status_code == 302
    client = client_for(alice)
    answer = client.post(f"/rent/?fabric={FABRIC}", {**form_for(client), "submit_token": bobs_form["submit_token"]})
    assert answer.status_code == 200
    assert "already used" in answer.content.decode()
    assert list(Rental.objects.values_list("created_by__username", flat=True)) == ["bob"]
