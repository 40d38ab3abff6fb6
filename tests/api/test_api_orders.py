"""Order validation on POST /api/v1/rentals: clear messages, the same checks as the rent form."""

from __future__ import annotations

import pytest

from accounts.models import Membership
from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db(transaction=True)


def base(simulator: Simulator, **changes: object) -> dict:
    body = {
        "fabric_id": simulator.offers()[0]["fabric_id"],
        "node_count": 2,
        "pod_name": "val",
        "ssh_public_keys": [SSH_KEY],
    }
    return {key: value for key, value in {**body, **changes}.items() if value is not None}


def refusal(response) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    return error["code"], error["message"]


def test_order_checks_say_what_is_wrong(simulator: Simulator, alice, make_key, api_client) -> None:
    client = api_client(make_key(alice))
    offers = simulator.offers()
    here, there = offers[0], offers[1]
    post = lambda **changes: client.post("/rentals", json=base(simulator, **changes))  # noqa: E731

    assert refusal(post(fabric_id="no such fabric"))[0] == "fabric_not_offered"
    assert refusal(post(node_count=None))[0] == "nodes_required"
    assert refusal(post(executor_ids=[here["nodes"][0]["id"], here["nodes"][1]["id"]]))[0] == "nodes_required"
    code, message = refusal(post(node_count=None, executor_ids=[here["nodes"][0]["id"], there["nodes"][0]["id"]]))
    assert code == "mixed_fabrics" and there["fabric_id"] in message
    assert refusal(post(node_count=None, executor_ids=[here["nodes"][0]["id"], "gone"]))[0] == "node_not_free"
    same = here["nodes"][0]["id"]
    assert refusal(post(node_count=None, executor_ids=[same, same]))[0] == "duplicate_nodes"
    assert refusal(post(node_count=999))[0] in {"not_enough_nodes", "validation_error"}
    assert refusal(post(pod_name="Bad Name"))[0] == "invalid_pod_name"
    code, message = refusal(post(ssh_public_keys=["-----BEGIN OPENSSH PRIVATE KEY-----"]))
    assert code == "invalid_ssh_key" and "SSH" in message
    assert refusal(post(template_id="nope"))[0] == "unknown_template"
    assert refusal(post(termination_hours=0))[0] == "validation_error"
    assert refusal(post(unexpected_field=1))[0] == "validation_error"
    assert refusal(post(customer="Globex"))[0] == "unknown_customer", "not a customer alice may rent for"
    assert Rental.objects.count() == 0


def test_a_partly_rented_node_cannot_join_a_cluster(simulator: Simulator, alice, make_key, api_client) -> None:
    fabric = next(f for f in simulator.offers() if any(n["available_gpu_count"] < n["gpu_count"] for n in f["nodes"]))
    split = next(n for n in fabric["nodes"] if n["available_gpu_count"] < n["gpu_count"])
    whole = next(n for n in fabric["nodes"] if n["available_gpu_count"] == n["gpu_count"])
    client = api_client(make_key(alice))
    nodes = client.get("/fabrics/nodes", params={"fabric_id": fabric["fabric_id"]}).json()["nodes"]
    assert {n["id"]: n["whole"] for n in nodes}[split["id"]] is False
    body = base(simulator, fabric_id=fabric["fabric_id"], node_count=None, executor_ids=[split["id"], whole["id"]])
    assert refusal(client.post("/rentals", json=body))[0] == "whole_nodes_only"
    picked = client.post("/rentals", json=base(simulator, fabric_id=fabric["fabric_id"], node_count=2))
    assert picked.status_code == 201, picked.text
    assert split["id"] not in picked.json()["executor_ids"], "the N cheapest are whole nodes"


def test_the_customer_may_be_named_by_id_or_name_and_is_required_when_ambiguous(
    simulator: Simulator, alice, globex, make_key, api_client
) -> None:
    Membership.objects.create(user=alice, customer=globex)
    client = api_client(make_key(alice))
    assert refusal(client.post("/rentals", json=base(simulator)))[0] == "customer_required"
    by_name = client.post("/rentals", json=base(simulator, customer="Globex"))
    assert by_name.status_code == 201 and by_name.json()["customer"]["name"] == "Globex"
    assert by_name.json()["customer_ref"] == "globex"
    by_id = client.post("/rentals", json=base(simulator, customer=globex.pk, node_count=3))
    assert by_id.status_code == 201 and by_id.json()["customer"]["id"] == globex.pk


def test_an_operator_may_set_the_customer_ref(simulator: Simulator, olga, acme, make_key, api_client) -> None:
    client = api_client(make_key(olga))
    created = client.post("/rentals", json=base(simulator, customer=acme.pk, customer_ref="acme-lab-7"))
    assert created.status_code == 201, created.text
    assert created.json()["customer_ref"] == "acme-lab-7"
    assert Rental.objects.get().created_by == olga
    bad = client.post("/rentals", json=base(simulator, customer=acme.pk, customer_ref="has space"))
    assert refusal(bad)[0] in {"invalid_customer_ref", "validation_error"}


def test_an_unreachable_upstream_is_a_503_not_a_500(alice, make_key, api_client) -> None:
    # The `credential` fixture points at lium.invalid when no simulator is running.
    client = api_client(make_key(alice))
    response = client.get("/fabrics")
    assert response.status_code in (502, 503), response.text
    assert response.json()["error"]["code"].startswith("upstream")
    body = {"fabric_id": "f", "node_count": 2, "pod_name": "x", "ssh_public_keys": [SSH_KEY]}
    refused = client.post("/rentals", json=body, headers={"Idempotency-Key": "k-down"})
    assert refused.status_code in (502, 503)
    # A transient failure is not stored: the same key runs afresh later.
    assert (
        "Idempotent-Replayed" not in client.post("/rentals", json=body, headers={"Idempotency-Key": "k-down"}).headers
    )
