"""Test sends and redeliveries make the dashboard POST to a URL a member chose: they are throttled per user and
per endpoint, with a message on the page and a 429 with a code in the API."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from api.keys import api_key_create
from notifications.models import Delivery
from notifications.services import endpoint_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _alice_is_an_admin(alice, admins) -> None:  # type: ignore[no-untyped-def]
    """She sends tests here: only a customer's admins may (tests/billing/test_team_access.py)."""
    admins(alice)


@pytest.fixture(autouse=True)
def one_window(settings, limiter_clock) -> None:  # type: ignore[no-untyped-def]
    """Every send of a test falls in the same rate-limit window, and the API's own budget stays out of the way."""
    settings.API_RATE_PER_MINUTE = 100_000
    settings.WEBHOOK_TEST_SENDS_PER_USER_PER_MINUTE = 6
    settings.WEBHOOK_TEST_SENDS_PER_USER_ENDPOINT_PER_MINUTE = 4
    settings.WEBHOOK_TEST_SENDS_PER_ENDPOINT_PER_MINUTE = 7


def register(user, url: str = "http://127.0.0.1:9/hook"):  # type: ignore[no-untyped-def]
    return endpoint_create(customer=user.memberships.get().customer, url=url, events=["*"], created_by=user)[0]


def test_test_sends_to_one_endpoint_stop_at_its_limit_with_a_message(alice, olga) -> None:
    endpoint = register(alice)
    client = Client()
    client.force_login(alice)
    for _ in range(4):
        client.post(f"/profile/webhooks/{endpoint.pk}/test/")
    page = client.post(f"/profile/webhooks/{endpoint.pk}/test/", follow=True).content.decode()
    assert "Too many test sends" in page
    assert Delivery.objects.count() == 4
    # That limit is alice's at this endpoint: someone else (an operator, who may act on any) still tests it.
    client.force_login(olga)
    client.post(f"/profile/webhooks/{endpoint.pk}/test/")
    assert Delivery.objects.count() == 5


def test_refused_tries_do_not_use_up_the_endpoints_budget_for_an_admin(alice, olga) -> None:
    # Someone else who may send (here an operator) hammers the button; alice must still be able to test.
    endpoint = register(alice)
    member = Client()
    member.force_login(olga)
    for _ in range(50):
        member.post(f"/profile/webhooks/{endpoint.pk}/test/")
    assert Delivery.objects.count() == 4, "olga's own limit at this endpoint"
    admin = Client()
    admin.force_login(alice)
    for _ in range(3):
        admin.post(f"/profile/webhooks/{endpoint.pk}/test/")
    assert Delivery.objects.count() == 7, "the endpoint's budget counted only olga's four sends"
    page = admin.post(f"/profile/webhooks/{endpoint.pk}/test/", follow=True).content.decode()
    assert "Too many test sends" in page and Delivery.objects.count() == 7, "the endpoint's own limit holds"


def test_one_user_cannot_spread_test_sends_over_many_endpoints(alice) -> None:
    endpoints = [register(alice, f"http://127.0.0.1:9/hook{n}") for n in range(3)]
    client = Client()
    client.force_login(alice)
    for _ in range(3):
        for endpoint in endpoints:
            client.post(f"/profile/webhooks/{endpoint.pk}/test/")
    assert Delivery.objects.count() == 6


def test_redeliveries_count_as_sends(alice) -> None:
    endpoint = register(alice)
    client = Client()
    client.force_login(alice)
    client.post(f"/profile/webhooks/{endpoint.pk}/test/")
    delivery = Delivery.objects.get()
    for _ in range(5):
        client.post(f"/profile/webhooks/{endpoint.pk}/deliveries/{delivery.pk}/redeliver/")
    assert Delivery.objects.count() == 4


def test_the_api_answers_429_with_a_code_and_retry_after(alice) -> None:
    endpoint = register(alice)
    key = api_key_create(user=alice, name="k", scopes=["read", "manage"])[1]
    client = Client(headers={"X-API-Key": key})
    answers = [client.post(f"/api/v1/webhooks/{endpoint.pk}/test").status_code for _ in range(5)]
    assert answers == [202, 202, 202, 202, 429]
    refused = client.post(f"/api/v1/webhooks/{endpoint.pk}/test")
    body = json.loads(refused.content)
    assert body["error"]["code"] == "webhook_test_throttled" and int(refused["Retry-After"]) > 0
    assert Delivery.objects.count() == 4
