"""`/api/v1/webhooks`: scopes, the customer an endpoint belongs to, the secret shown once, the error envelope."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from api.keys import api_key_create
from notifications.models import Delivery, WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _alice_and_bob_are_admins(alice, bob, admins) -> None:  # type: ignore[no-untyped-def]
    """They add and delete endpoints here: only a customer's admins may (tests/billing/test_team_access.py)."""
    admins(alice, bob)


HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def _generous_request_budget(settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_RATE_PER_MINUTE = 100_000


class Api:
    def __init__(self, user, scopes=("read", "rent", "manage")) -> None:  # type: ignore[no-untyped-def]
        self.client = Client()
        self.key = api_key_create(user=user, name="k", scopes=list(scopes))[1]

    def call(self, method: str, path: str, body: object = None):  # type: ignore[no-untyped-def]
        data = body if isinstance(body, str) else json.dumps(body) if body is not None else None
        return getattr(self.client, method)(
            f"/api/v1{path}", data=data, content_type="application/json", headers={"X-API-Key": self.key}
        )


def error_code(response) -> str:  # type: ignore[no-untyped-def]
    body = response.json()
    assert body["success"] is False and body["error"]["request_id"] == response["X-Request-Id"]
    return body["error"]["code"]


def test_a_member_registers_lists_tests_and_deletes_an_endpoint(alice) -> None:
    api = Api(alice)
    created = api.call("post", "/webhooks", {"url": HOOK, "events": ["*"]})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and body["customer"]["name"] == "Acme Research"
    assert created["Cache-Control"] == "no-store"

    listed = api.call("get", "/webhooks").json()["items"]
    assert [item["id"] for item in listed] == [body["id"]]
    assert "secret" not in listed[0] and body["secret"] not in json.dumps(listed)

    tested = api.call("post", f"/webhooks/{body['id']}/test")
    assert tested.status_code == 202 and tested.json()["event_type"] == "webhook.test"
    deliveries = api.call("get", f"/webhooks/{body['id']}/deliveries").json()["items"]
    assert [d["event_id"] for d in deliveries] == [tested.json()["event_id"]]

    again = api.call("post", f"/webhooks/{body['id']}/deliveries/{deliveries[0]['id']}/redeliver")
    assert again.status_code == 202 and again.json()["event_id"] == deliveries[0]["event_id"]

    assert api.call("delete", f"/webhooks/{body['id']}").status_code == 204
    assert api.call("get", "/webhooks").json()["items"] == []
    assert error_code(api.call("delete", f"/webhooks/{body['id']}")) == "not_found"


def test_scopes_read_for_reads_manage_for_changes(alice) -> None:
    reader = Api(alice, scopes=("read",))
    refused = reader.call("post", "/webhooks", {"url": HOOK, "events": ["*"]})
    assert refused.status_code == 403 and error_code(refused) == "insufficient_scope"
    assert reader.call("get", "/webhooks").status_code == 200
    manager = Api(alice, scopes=("manage",))
    endpoint_id = manager.call("post", "/webhooks", {"url": HOOK, "events": ["*"]}).json()["id"]
    for method, path in [("delete", f"/webhooks/{endpoint_id}"), ("post", f"/webhooks/{endpoint_id}/test")]:
        response = reader.call(method, path)
        assert response.status_code == 403 and error_code(response) == "insufficient_scope"
    assert error_code(manager.call("get", "/webhooks")) == "insufficient_scope"


def test_customers_are_isolated_support_reads_and_operators_must_name_a_customer(alice, bob, sam, olga) -> None:
    alices = Api(alice).call("post", "/webhooks", {"url": HOOK, "events": ["*"]}).json()
    bobs_api = Api(bob)
    assert bobs_api.call("get", "/webhooks").json()["items"] == []
    for method, path in [
        ("delete", f"/webhooks/{alices['id']}"),
        ("post", f"/webhooks/{alices['id']}/test"),
        ("get", f"/webhooks/{alices['id']}/deliveries"),
    ]:
        assert bobs_api.call(method, path).status_code == 404
    # bob cannot register for Acme either
    response = bobs_api.call("post", "/webhooks", {"url": HOOK, "events": ["*"], "customer": "Acme Research"})
    assert response.status_code == 422 and error_code(response) == "unknown_customer"

    sams = Api(sam)
    assert [item["id"] for item in sams.call("get", "/webhooks").json()["items"]] == [alices["id"]]
    for method, path, body in [
        ("post", "/webhooks", {"url": HOOK, "events": ["*"]}),
        ("post", f"/webhooks/{alices['id']}/test", None),
        ("delete", f"/webhooks/{alices['id']}", None),
    ]:
        response = sams.call(method, path, body)
        assert response.status_code == 403 and error_code(response) == "read_only_role"

    olgas = Api(olga)
    response = olgas.call("post", "/webhooks", {"url": HOOK, "events": ["*"]})
    assert response.status_code == 422 and error_code(response) == "customer_required"
    response = olgas.call("post", "/webhooks", {"url": HOOK, "events": ["rental.ready"], "customer": "Globex"})
    assert response.status_code == 201 and response.json()["customer"]["name"] == "Globex"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("not json", None),
        ("[]", None),
        ({}, "validation_error"),
        ({"url": HOOK}, "validation_error"),
        ({"url": HOOK, "events": []}, "validation_error"),
        ({"url": HOOK, "events": ["rental.exploded"]}, "invalid_events"),
        ({"url": HOOK, "events": "*"}, "validation_error"),
        ({"url": 5, "events": ["*"]}, "validation_error"),
        ({"url": "javascript:alert(1)", "events": ["*"]}, "invalid_url"),
        ({"url": "https://x/" + "a" * 3000, "events": ["*"]}, "validation_error"),
        ({"url": HOOK, "events": ["*"], "customer": "x\x00y"}, "unknown_customer"),
        # A lone surrogate cannot be encoded for the database (a 500 on both); a name is at most 200 characters.
        ('{"url": "' + HOOK + '", "events": ["*"], "customer": "x\\ud800y"}', "validation_error"),
        ({"url": HOOK, "events": ["*"], "customer": "x" * 201}, "validation_error"),
        ({"url": HOOK, "events": ["*"], "extra": 1}, "validation_error"),
    ],
)
def test_bad_bodies_get_the_envelope_never_a_500(alice, body, code) -> None:
    response = Api(alice).call("post", "/webhooks", body)
    assert 400 <= response.status_code < 500, response.content
    got = error_code(response)
    if code is not None:
        assert got == code
    assert not WebhookEndpoint.objects.exists()


def test_production_refuses_http_and_private_addresses_through_the_api(alice, settings) -> None:
    settings.WEBHOOK_REQUIRE_HTTPS = True
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    api = Api(alice)
    for url, words in [("http://93.184.216.34/h", "https://"), ("https://127.0.0.1/h", "private, loopback")]:
        response = api.call("post", "/webhooks", {"url": url, "events": ["*"]})
        assert response.status_code == 422 and error_code(response) == "invalid_url"
        assert words in response.json()["error"]["message"]
    assert not Delivery.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ("{", 400, "invalid_json"),
        ("[1]", 400, "invalid_json"),
        ('"text"', 400, "invalid_json"),
        ("[" * 100_000, 400, "invalid_json"),
        (b"\xff\xfe", 400, "invalid_json"),
        ({"url": HOOK}, 422, "validation_error"),
        ({"url": HOOK, "events": ["*"], "colour": "red"}, 422, "validation_error"),
    ],
)
def test_a_bad_body_is_refused_in_the_envelope(alice, body, status, code) -> None:  # type: ignore[no-untyped-def]
    api = Api(alice)
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    answer = api.client.post(
        "/api/v1/webhooks", data=data, content_type="application/json", headers={"X-API-Key": api.key}
    )
    assert answer.status_code == status and error_code(answer) == code
    if status == 422:
        assert answer.json()["validation_errors"], "the fields at fault are named"
    assert not WebhookEndpoint.objects.exists()
