"""POST /api/v1/rentals while Lium has switched cluster renting off: `cluster_renting_disabled`, nothing saved."""

from __future__ import annotations

import pytest

from rentals import tasks
from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db(transaction=True)


def order(simulator: Simulator) -> dict:
    fabric_id = simulator.offers()[0]["fabric_id"]
    return {"fabric_id": fabric_id, "node_count": 2, "pod_name": "off", "ssh_public_keys": [SSH_KEY]}


def test_an_order_while_off_answers_cluster_renting_disabled(simulator: Simulator, alice, make_key, api_client) -> None:
    simulator.config(multinode_clusters_enabled=False)
    tasks.cluster_switch_read()
    client = api_client(make_key(alice))
    assert client.get("/fabrics").json()["cluster_renting_off_since"] is not None  # said before anyone orders
    response = client.post("/rentals", json=order(simulator), headers={"Idempotency-Key": "off-1"})
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "cluster_renting_disabled"
    assert "switched cluster renting off" in response.json()["error"]["message"]
    assert response.headers["Retry-After"].isdigit()
    assert not Rental.objects.exists()
    # Back on: the same key is free for the order (a 503 is not stored as its answer).
    simulator.config(multinode_clusters_enabled=True)
    tasks.cluster_switch_read()
    assert client.get("/fabrics").json()["cluster_renting_off_since"] is None
    again = client.post("/rentals", json=order(simulator), headers={"Idempotency-Key": "off-1"})
    assert again.status_code == 201, again.text


def test_an_absent_switch_never_blocks_an_order(simulator: Simulator, alice, make_key, api_client) -> None:
    simulator.config(multinode_clusters_enabled=None)
    tasks.cluster_switch_read()
    response = api_client(make_key(alice)).post("/rentals", json=order(simulator))
    assert response.status_code == 201, response.text
