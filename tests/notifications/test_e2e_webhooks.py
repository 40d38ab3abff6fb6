"""End to end, as issue 17 checks it: a webhook registered through the API receives `rental.rented` and
`rental.ready` for a rental rented through the API (real worker, simulator over HTTP), each signature valid;
a redelivery keeps the webhook-id; bob's endpoint receives nothing about alice's rentals."""

from __future__ import annotations

import time

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from api.keys import api_key_create
from tests.conftest import SSH_KEY, Simulator

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _alice_and_bob_are_admins(alice, bob, admins) -> None:  # type: ignore[no-untyped-def]
    """They add and delete endpoints here: only a customer's admins may (tests/billing/test_team_access.py)."""
    admins(alice, bob)


def wait_for(condition, what: str, timeout: float = 90.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"never happened: {what} (last: {found!r})")


def test_alices_webhook_receives_rented_and_ready_signed_and_bobs_nothing(
    simulator: Simulator, celery_worker_process, alice, bob, receiver, live_server, settings
) -> None:
    settings.API_RATE_PER_MINUTE = 100_000

    def client(user) -> httpx.Client:  # type: ignore[no-untyped-def]
        key = api_key_create(user=user, name="e2e", scopes=["read", "rent", "manage"])[1]
        return httpx.Client(base_url=f"{live_server.url}/api/v1", headers={"X-API-Key": key}, timeout=30.0)

    alices, bobs = client(alice), client(bob)
    hook = alices.post("/webhooks", json={"url": receiver.url + "/acme", "events": ["*"]})
    assert hook.status_code == 201, hook.text
    secret = hook.json()["secret"]
    assert bobs.post("/webhooks", json={"url": receiver.url + "/globex", "events": ["*"]}).status_code == 201

    fabric_id = simulator.offers()[0]["fabric_id"]
    order = {"fabric_id": fabric_id, "node_count": 2, "pod_name": "hooked", "ssh_public_keys": [SSH_KEY]}
    rented = alices.post("/rentals", json=order)
    assert rented.status_code == 201, rented.text
    rental_id = rented.json()["id"]

    def received_types() -> list[str]:
        return [Webhook(secret).verify(r.body, r.headers)["type"] for r in receiver.requests if r.path == "/hook/acme"]

    wait_for(lambda: {"rental.rented", "rental.ready"} <= set(received_types()), "rented and ready delivered")
    payloads = [Webhook(secret).verify(r.body, r.headers) for r in receiver.requests]
    assert all(p["data"]["rental"]["id"] == rental_id for p in payloads)
    assert all(p["data"]["rental"]["customer_ref"] == "acme" for p in payloads)
    assert {r.path for r in receiver.requests} == {"/hook/acme"}, "bob's endpoint got nothing of alice's"

    ready = next(r for r in receiver.requests if Webhook(secret).verify(r.body, r.headers)["type"] == "rental.ready")
    deliveries = alices.get(f"/webhooks/{hook.json()['id']}/deliveries").json()["items"]
    ready_delivery = next(d for d in deliveries if d["event_id"] == ready.headers["webhook-id"])
    assert ready_delivery["status"] == "delivered" and ready_delivery["last_status_code"] == 200
    before = len(receiver.requests)
    again = alices.post(f"/webhooks/{hook.json()['id']}/deliveries/{ready_delivery['id']}/redeliver")
    assert again.status_code == 202, again.text
    wait_for(lambda: len(receiver.requests) > before, "the redelivery arrived")
    repeat = receiver.requests[-1]
    assert repeat.headers["webhook-id"] == ready.headers["webhook-id"]
    assert Webhook(secret).verify(repeat.body, repeat.headers)["type"] == "rental.ready"
