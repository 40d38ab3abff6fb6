"""Slack as a webhook flavour: a `slack` endpoint gets the same events as Slack messages with a link to the rental,
through the same outbox (retries with the same bytes, the delivery log), to a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from notifications.models import Delivery, WebhookEndpoint
from notifications.services import endpoint_create, endpoint_send_test
from notifications.slack import kind_for_url, slack_message
from tests.notifications.conftest import deliver_all

pytestmark = pytest.mark.django_db


def slack_endpoint(user, url: str) -> WebhookEndpoint:  # type: ignore[no-untyped-def]
    customer = user.memberships.get().customer
    return endpoint_create(customer=customer, url=url, events=["*"], created_by=user, kind="slack")[0]


def texts(receiver) -> list[str]:  # type: ignore[no-untyped-def]
    return [json.loads(request.body)["text"] for request in receiver.requests]


def test_a_slack_endpoint_gets_each_event_as_a_message_with_a_link_to_the_rental(
    alice, receiver, make_rental, move_rental, settings
) -> None:
    settings.SITE_URL = "https://clusters.example.com"
    endpoint = slack_endpoint(alice, receiver.url)
    rental = make_rental(user=alice, status="sending", pod_name="train-7")
    move_rental(rental)
    assert deliver_all() == ["delivered"]

    [request] = receiver.requests
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.body) == {
        "text": f"*Cluster rented (nodes starting)*: <https://clusters.example.com/rentals/{rental.public_id}/|train-7>"
        " (Acme Research), now rented."
    }
    delivery = Delivery.objects.get(endpoint=endpoint)
    assert (delivery.status, delivery.last_status_code, delivery.last_response) == ("delivered", 200, "thanks")


def test_a_failed_slack_post_is_retried_with_the_same_message(alice, receiver, make_rental, move_rental) -> None:
    slack_endpoint(alice, receiver.url)
    receiver.answer(500, b"internal_error")
    receiver.then(200, b"ok")
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["retry"]
    delivery = Delivery.objects.get()
    assert (delivery.last_status_code, delivery.last_response) == (500, "internal_error")
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert deliver_all() == ["delivered"]
    first, second = receiver.requests
    assert first.body == second.body and first.headers["webhook-id"] == second.headers["webhook-id"]


def test_a_standard_endpoint_beside_it_still_gets_the_event_json(alice, receiver, make_rental, move_rental) -> None:
    slack_endpoint(alice, receiver.url + "/slack")
    endpoint_create(customer=alice.memberships.get().customer, url=receiver.url, events=["*"], created_by=alice)
    move_rental(make_rental(user=alice, status="sending"))
    deliver_all()
    by_path = {request.path: json.loads(request.body) for request in receiver.requests}
    assert set(by_path["/hook/slack"]) == {"text"}
    assert by_path["/hook"]["type"] == "rental.rented"


def test_the_test_button_posts_a_slack_message(alice, receiver) -> None:
    delivery = endpoint_send_test(endpoint=slack_endpoint(alice, receiver.url))
    deliver_all()
    assert texts(receiver) == ["Test event from the Lium clusters dashboard: this Slack webhook works."]
    delivery.refresh_from_db()
    assert delivery.status == "delivered"


def test_a_budget_threshold_reads_as_a_sentence() -> None:
    body = json.dumps(
        {
            "id": "msg_1",
            "type": "budget.threshold",
            "data": {
                "customer_ref": "acme",
                "month": "2030-06",
                "threshold_pct": 80,
                "spent_usd": "80.00",
                "budget_usd": "100.00",
            },
        }
    )
    text = json.loads(slack_message(event_type="budget.threshold", body=body))["text"]
    assert text.startswith("*Budget threshold reached*: acme spent $80.00 of $100.00 in 2030-06 (80 %). <")


def test_markup_in_a_name_is_escaped_not_read_as_a_slack_link_or_mention() -> None:
    body = json.dumps(
        {
            "id": "msg_1",
            "type": "x",
            "data": {"rental": {"id": "00000000-0000-4000-8000-000000000001", "pod_name": "<!channel>"}},
        }
    )
    text = json.loads(slack_message(event_type="rental.ready", body=body))["text"]
    assert "&lt;!channel&gt;" in text and "<!channel>" not in text


def test_the_kind_is_slack_for_slacks_host_only() -> None:
    assert kind_for_url("https://hooks.slack.com/services/T0/B0/abc") == "slack"
    assert kind_for_url("https://HOOKS.SLACK.COM/services/T0/B0/abc") == "slack"
    assert kind_for_url("https://hooks.slack.com.example.com/x") == "standard"
    assert kind_for_url("https://example.com/hooks.slack.com") == "standard"


def test_pages_and_api_show_a_slack_url_without_its_token(alice, admins, client_for) -> None:
    admins(alice)
    WebhookEndpoint(
        customer=alice.memberships.get().customer,
        url="https://hooks.slack.com/services/T0/B0/SeCrEtToKeN",
        kind="slack",
        events=["*"],
        created_by=alice,
        secret_encrypted="",
    ).save()
    page = client_for(alice).get("/profile/webhooks/").content.decode()
    assert "https://hooks.slack.com/services/T0/B0/…" in page and "SeCrEtToKeN" not in page
    key = api_key_create(user=alice, name="k", scopes=["read"])[1]
    listed = Client().get("/api/v1/webhooks", headers={"X-API-Key": key}).json()["items"]
    assert [(item["kind"], item["url"]) for item in listed] == [("slack", "https://hooks.slack.com/services/T0/B0/…")]


def test_the_api_registers_a_slack_endpoint_and_refuses_an_unknown_kind(alice, admins, receiver) -> None:
    admins(alice)
    key = api_key_create(user=alice, name="k", scopes=["read", "manage"])[1]
    client = Client()

    def post(body: dict):  # type: ignore[no-untyped-def]
        return client.post("/api/v1/webhooks", body, content_type="application/json", headers={"X-API-Key": key})

    made = post({"url": receiver.url, "events": ["*"], "kind": "slack"})
    assert made.status_code == 201 and made.json()["kind"] == "slack"
    assert post({"url": receiver.url, "events": ["*"]}).json()["kind"] == "standard"
    wrong = post({"url": receiver.url, "events": ["*"], "kind": "teams"})
    assert wrong.status_code == 422
    assert wrong.json()["validation_errors"][0]["field"] == "kind"


def test_the_form_registers_a_slack_endpoint(alice, admins, receiver, client_for) -> None:
    admins(alice)
    answer = client_for(alice).post("/profile/webhooks/", {"url": receiver.url, "kind": "slack", "all_events": "on"})
    assert answer.status_code == 200
    assert WebhookEndpoint.objects.get().kind == "slack"


def test_capacity_available_says_what_was_found_with_a_link_to_the_rent_form() -> None:
    rent_url = "https://clusters.example.com/rent/?fabric=fab-1&customer=1&nodes=a%2Cb"
    body = json.dumps(
        {
            "id": "msg_1",
            "type": "capacity.available",
            "data": {"message": "2 x H100 free on fabric fab-1 at $30.00/hour.", "rent_url": rent_url},
        }
    )
    text = json.loads(slack_message(event_type="capacity.available", body=body))["text"]
    assert text == (
        "*Capacity available (a watch matched)*: 2 x H100 free on fabric fab-1 at $30.00/hour. "
        "<https://clusters.example.com/rent/?fabric=fab-1&amp;customer=1&amp;nodes=a%2Cb|Open the rent form on them>"
    )


def test_capacity_an_auto_rent_rented_links_to_its_rental(settings) -> None:
    settings.SITE_URL = "https://clusters.example.com"
    rental = {"id": "00000000-0000-4000-8000-000000000001", "pod_name": "auto-pair", "status": "queued"}
    body = json.dumps(
        {
            "id": "msg_1",
            "type": "capacity.available",
            "data": {"rental": rental, "message": "Found. Rented them.", "rent_url": "https://x.example/rent/"},
        }
    )
    text = json.loads(slack_message(event_type="capacity.available", body=body))["text"]
    assert text == (
        "*Capacity available (a watch matched)*: Found. Rented them. "
        f"<https://clusters.example.com/rentals/{rental['id']}/|auto-pair>"
    )


def test_a_budget_threshold_links_to_the_usage_page(settings) -> None:
    settings.SITE_URL = "https://clusters.example.com"
    body = json.dumps({"id": "msg_1", "type": "budget.threshold", "data": {"month": "2030-06", "threshold_pct": 80}})
    text = json.loads(slack_message(event_type="budget.threshold", body=body))["text"]
    assert text.endswith(" <https://clusters.example.com/usage/?month=2030-06|Usage>")
