"""The API carries time to ready: a fabric's nodes say Lium's estimate (null when Lium does not say), a rental says
the estimate it was ordered with and, once ready, how long it took; the schema documents both."""

from __future__ import annotations

import pytest

from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_fabrics_nodes_carry_their_estimate_and_slow_flag(simulator: Simulator, alice, make_key, api_client):
    offer = simulator.offers()[0]
    slow = offer["nodes"][0]["id"]
    body = {"executor_ids": [slow], "extra_seconds": 99, "warning_message": "Slow disk"}
    simulator.http.post("/_sim/slow-executors", json=body).raise_for_status()
    answer = api_client(make_key(alice)).get("/fabrics/nodes", params={"fabric_id": offer["fabric_id"]})
    assert answer.status_code == 200, answer.text
    nodes = {node["id"]: node for node in answer.json()["nodes"]}
    assert (nodes[slow]["estimated_ready_seconds"], nodes[slow]["slow_machine"]) == (100, True)
    assert nodes[slow]["estimate_warning"] == "Slow disk"
    others = [node for node_id, node in nodes.items() if node_id != slow]
    assert {(node["estimated_ready_seconds"], node["slow_machine"], node["estimate_warning"]) for node in others} == {
        (1, False, "")
    }


def test_nodes_are_listed_with_null_estimates_when_lium_fails_them(simulator: Simulator, alice, make_key, api_client):
    simulator.faults([{"fault": "error_before_commit", "route": "estimate", "probability": 1.0}])
    offer = simulator.offers()[0]
    answer = api_client(make_key(alice)).get("/fabrics/nodes", params={"fabric_id": offer["fabric_id"]})
    assert answer.status_code == 200, answer.text
    assert {node["estimated_ready_seconds"] for node in answer.json()["nodes"]} == {None}
    assert {node["slow_machine"] for node in answer.json()["nodes"]} == {None}


def test_a_rental_answer_carries_the_estimate_it_was_ordered_with(simulator: Simulator, alice, make_key, api_client):
    client = api_client(make_key(alice))
    fabric_id = simulator.offers()[0]["fabric_id"]
    body = {"fabric_id": fabric_id, "node_count": 2, "pod_name": "eta", "ssh_public_keys": [SSH_KEY]}
    created = client.post("/rentals", json=body, headers={"Idempotency-Key": "eta-1"})
    assert created.status_code in (200, 201, 202), created.text
    assert created.json()["estimated_ready_seconds"] == 1
    assert created.json()["ready_seconds"] is None
    rental = Rental.objects.get()
    Rental.objects.filter(pk=rental.pk).update(ready_seconds=7)
    shown = client.get(f"/rentals/{rental.public_id}").json()
    assert (shown["estimated_ready_seconds"], shown["ready_seconds"]) == (1, 7)


def test_the_schema_documents_the_time_to_ready_fields(client) -> None:  # type: ignore[no-untyped-def]
    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert {"estimated_ready_seconds", "ready_seconds"} <= set(schemas["RentalOut"]["properties"])
    assert {"estimated_ready_seconds", "slow_machine", "estimate_warning"} <= set(schemas["NodeOut"]["properties"])
