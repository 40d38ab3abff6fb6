"""End to end through the JSON API: a plain httpx client with a key rents a cluster (real worker, simulator)."""

from __future__ import annotations

import time

import pytest

from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_for_status(client, rental_id: str, statuses: set[str], timeout: float = 45.0) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = client.get(f"/rentals/{rental_id}").json()
        if body["status"] in statuses:
            return body
        time.sleep(0.3)
    raise AssertionError(f"status never reached {statuses}; last: {body}")


def test_alice_rents_a_cluster_through_the_api_and_a_repeat_is_a_replay(
    simulator: Simulator, celery_worker_process, alice, make_key, api_client
) -> None:
    client = api_client(make_key(alice))

    fabrics = client.get("/fabrics")
    assert fabrics.status_code == 200, fabrics.text
    fabric_id = simulator.offers()[0]["fabric_id"]
    assert fabric_id in {fabric["fabric_id"] for fabric in fabrics.json()["fabrics"]}
    nodes = client.get("/fabrics/nodes", params={"fabric_id": fabric_id})
    assert nodes.status_code == 200, nodes.text
    assert len(nodes.json()["nodes"]) >= 2

    body = {"fabric_id": fabric_id, "node_count": 2, "pod_name": "api-train", "ssh_public_keys": [SSH_KEY]}
    headers = {"Idempotency-Key": "order-0001"}
    first = client.post("/rentals", json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert "Idempotent-Replayed" not in first.headers
    rental = first.json()
    assert rental["status"] == "queued"
    assert rental["customer"]["name"] == "Acme Research"
    assert rental["customer_ref"] == "acme"
    assert len(rental["executor_ids"]) == 2

    again = client.post("/rentals", json=body, headers=headers)
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == rental["id"]
    assert again.content == first.content, "the stored answer is replayed as it was"

    changed = client.post("/rentals", json={**body, "pod_name": "api-other"}, headers=headers)
    assert changed.status_code == 422
    assert changed.json()["error"]["code"] == "idempotency_key_reused"
    assert Rental.objects.count() == 1, "neither repeat created a rental"

    ready = wait_for_status(client, rental["id"], {"ready"})
    assert len(ready["members"]) == 2
    assert {member["rank"] for member in ready["members"]} == {0, 1}
    assert all(member["ssh_command"] for member in ready["members"])
    assert ready["attempts"] and ready["attempts"][0]["classification"] == "confirmed"
    assert ready["cluster_id"]

    listed = client.get("/rentals", params={"status": "ready", "customer_ref": "acme"}).json()
    assert [item["id"] for item in listed["items"]] == [rental["id"]]
    assert client.get("/rentals", params={"status": "queued"}).json()["items"] == []

    # Bearer works too; terminate needs `manage`.
    bearer = api_client(make_key(alice, scopes=["read", "manage"]), bearer=True)
    terminated = bearer.post(f"/rentals/{rental['id']}/terminate")
    assert terminated.status_code == 202, terminated.text
    assert terminated.json()["status"] == "terminating"
    wait_for_status(client, rental["id"], {"terminated"})

    ledger = simulator.ledger()
    assert len(ledger) == 1, "one cluster rented, however often the POST was repeated"
    assert ledger[0]["customer_ref"] == "acme"
