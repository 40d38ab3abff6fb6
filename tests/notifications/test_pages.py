"""The profile pages: register an endpoint (secret shown once), the delivery log, test, redeliver, delete."""

from __future__ import annotations

import pytest

from notifications.models import Delivery, WebhookEndpoint
from notifications.services import endpoint_create, endpoint_send_test

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _alice_and_bob_are_admins(alice, bob, admins) -> None:  # type: ignore[no-untyped-def]
    """They add and delete endpoints here: only a customer's admins may (tests/billing/test_team_access.py)."""
    admins(alice, bob)


def test_alice_registers_an_endpoint_and_sees_the_secret_once(alice, client) -> None:
    client.force_login(alice)
    response = client.post("/profile/webhooks/", {"url": "http://127.0.0.1:9/hook", "all_events": "on"})
    assert response.status_code == 200
    page = response.content.decode()
    endpoint = WebhookEndpoint.objects.get()
    secret = endpoint.get_secret()
    assert secret in page and "shown only once" in page
    assert response["Cache-Control"] == "no-store"
    assert endpoint.events == ["*"] and endpoint.customer.name == "Acme Research"
    again = client.get("/profile/webhooks/").content.decode()
    assert "http://127.0.0.1:9/hook" in again and secret not in again
    assert secret not in client.get(f"/profile/webhooks/{endpoint.pk}/").content.decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"url": "", "all_events": "on"}, "This field is required"),
        ({"url": "javascript:alert(1)", "all_events": "on"}, "must start with https://"),
        ({"url": "http://127.0.0.1:9/hook"}, "Choose every event, or at least one event type"),
        ({"url": "http://127.0.0.1:9/hook", "events": ["nope"]}, "Select a valid choice"),
        ({"url": "https://x/" + "a" * 2100, "all_events": "on"}, "at most 2000 characters"),
        ({"url": "http://127.0.0.1:9/hook", "all_events": "on", "customer": "999999"}, "Select a valid choice"),
        ({"url": "http://127.0.0.1:9/hook", "all_events": "on", "customer": "abc"}, "Select a valid choice"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(alice, client, data, message) -> None:
    client.force_login(alice)
    response = client.post("/profile/webhooks/", data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_alice_may_not_register_for_bobs_customer(alice, bob, client) -> None:
    client.force_login(alice)
    globex = bob.memberships.get().customer
    response = client.post(
        "/profile/webhooks/", {"url": "http://127.0.0.1:9/h", "all_events": "on", "customer": globex.pk}
    )
    assert "Select a valid choice" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_the_delivery_log_test_and_redeliver_buttons(alice, client) -> None:
    endpoint, _ = endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice
    )
    client.force_login(alice)
    response = client.post(f"/profile/webhooks/{endpoint.pk}/test/", follow=True)
    delivery = Delivery.objects.get()
    assert delivery.event.type == "webhook.test"
    page = response.content.decode()
    assert delivery.event_id in page and "webhook.test" in page and "Send a test event" in page
    Delivery.objects.filter(pk=delivery.pk).update(
        status="delivered", last_status_code=204, last_duration_ms=12, attempt_count=1, last_response="ok" * 250
    )
    page = client.get(f"/profile/webhooks/{endpoint.pk}/").content.decode()
    assert "204" in page and "12 ms" in page
    client.post(f"/profile/webhooks/{endpoint.pk}/deliveries/{delivery.pk}/redeliver/")
    assert list(Delivery.objects.values_list("event_id", flat=True)) == [delivery.event_id] * 2
    client.post(f"/profile/webhooks/{endpoint.pk}/delete/")
    assert not WebhookEndpoint.objects.exists()


def test_support_reads_every_log_but_changes_nothing_and_bob_sees_nothing(alice, bob, sam, client) -> None:
    endpoint, _ = endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice
    )
    delivery = endpoint_send_test(endpoint=endpoint)
    client.force_login(sam)
    assert "http://127.0.0.1:9/hook" in client.get("/profile/webhooks/").content.decode()
    page = client.get(f"/profile/webhooks/{endpoint.pk}/").content.decode()
    assert delivery.event_id in page and "Redeliver" not in page and "Send a test event" not in page
    refused = client.post(f"/profile/webhooks/{endpoint.pk}/test/")
    assert (
        refused.status_code == 403 and "Support can look at webhooks but not change them." in refused.content.decode()
    )
    assert client.post("/profile/webhooks/", {"url": "http://127.0.0.1:9/x", "all_events": "on"}).status_code == 403
    client.force_login(bob)
    assert "127.0.0.1:9/hook" not in client.get("/profile/webhooks/").content.decode()
    assert client.get(f"/profile/webhooks/{endpoint.pk}/").status_code == 404
    assert client.post(f"/profile/webhooks/{endpoint.pk}/delete/").status_code == 404
    assert WebhookEndpoint.objects.count() == 1 and Delivery.objects.count() == 1
