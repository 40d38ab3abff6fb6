"""Only a customer's admins (and operators) add or delete its webhook endpoints, on the pages and in the API; its
other members see them read-only, with who made each."""

from __future__ import annotations

import pytest
from django.test import Client

from api.keys import api_key_create
from notifications.models import WebhookEndpoint
from notifications.services import endpoint_create

pytestmark = pytest.mark.django_db

NEW = {"customer": "", "url": "http://127.0.0.1:9/mine", "all_events": "on"}


@pytest.fixture
def alices_endpoint(alice, carol, admins) -> WebhookEndpoint:  # type: ignore[no-untyped-def]
    admins(alice)
    customer = alice.memberships.get().customer
    return endpoint_create(customer=customer, url="http://127.0.0.1:9/alice", events=["*"], created_by=alice)[0]


def test_a_plain_member_sees_the_endpoints_and_their_maker_but_cannot_add_or_delete(
    client_for, carol, alices_endpoint
) -> None:
    client = client_for(carol)
    page = client.get("/profile/webhooks/").content.decode()
    assert "http://127.0.0.1:9/alice" in page and "alice" in page and "Add an endpoint" not in page
    assert "Only your customer's admins add and delete webhook endpoints" in page
    form = {**NEW, "customer": str(alices_endpoint.customer_id)}
    assert client.post("/profile/webhooks/", form).status_code == 403
    assert client.post(f"/profile/webhooks/{alices_endpoint.pk}/delete/").status_code == 403
    detail = client.get(f"/profile/webhooks/{alices_endpoint.pk}/").content.decode()
    assert "Delete endpoint" not in detail and "Made by" in detail
    assert WebhookEndpoint.objects.count() == 1


def test_an_admin_adds_and_deletes_on_the_page(client_for, alice, alices_endpoint) -> None:
    client = client_for(alice)
    form = {**NEW, "customer": str(alices_endpoint.customer_id)}
    assert "whsec_" in client.post("/profile/webhooks/", form).content.decode()
    assert client.post(f"/profile/webhooks/{alices_endpoint.pk}/delete/").status_code == 302
    assert list(WebhookEndpoint.objects.values_list("url", flat=True)) == ["http://127.0.0.1:9/mine"]


def test_the_api_refuses_a_plain_member_and_shows_the_maker(carol, alice, alices_endpoint) -> None:
    _key, text = api_key_create(user=carol, name="k", scopes=["read", "manage"])
    headers = {"X-API-Key": text}
    client = Client()
    created = client.post(
        "/api/v1/webhooks", {"url": "http://127.0.0.1:9/x", "events": ["*"]}, "application/json", headers=headers
    )
    assert created.status_code == 403 and "admins" in created.json()["message"]
    assert client.delete(f"/api/v1/webhooks/{alices_endpoint.pk}", headers=headers).status_code == 403
    listed = client.get("/api/v1/webhooks", headers=headers).json()["items"]
    assert [(item["url"], item["created_by"], item["disabled_at"]) for item in listed] == [
        ("http://127.0.0.1:9/alice", "alice", None)
    ]
    _key, alices = api_key_create(user=alice, name="k", scopes=["read", "manage"])
    gone = client.delete(f"/api/v1/webhooks/{alices_endpoint.pk}", headers={"X-API-Key": alices})
    assert gone.status_code == 204
