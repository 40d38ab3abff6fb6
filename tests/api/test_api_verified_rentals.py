"""Issue 27, end to end: verified rentals through the JSON API, a real worker (every queue, fabric_check included)
and the simulator's pods over SSH. The simulator's H100 fabric: 2880 Gb/s healthy, a slow node a fifth; floor 2240."""

from __future__ import annotations

import json
import time

import pytest

from rentals.models import Rental
from rentals.verification.choices import fabric_check_rent_again
from tests.conftest import SSH_KEY, Simulator

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_for_status(client, rental_id: str, statuses: set[str], timeout: float = 90.0) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = client.get(f"/rentals/{rental_id}").json()
        if body["status"] in statuses:
            return body
        time.sleep(0.3)
    raise AssertionError(f"status never reached {statuses}; last: {body}")


def authorized_keys(simulator: Simulator, rental: dict) -> list[list[str]]:
    return [
        simulator.http.get(f"/_sim/pods/{member['pod_id']}/authorized-keys").json()["authorized_keys"]
        for member in rental["members"]
    ]


def rent(simulator: Simulator, client, nodes: int, pod_name: str, verify: bool = True) -> dict:  # type: ignore[no-untyped-def]
    simulator.http.post("/_sim/config", json={"ssh": True}).raise_for_status()
    body = {
        "fabric_id": simulator.offers()[0]["fabric_id"],
        "node_count": nodes,
        "pod_name": pod_name,
        "ssh_public_keys": [SSH_KEY],
        "verify_fabric": verify,
    }
    answer = client.post("/rentals", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_a_verified_rental_shows_its_bandwidth_becomes_ready_and_the_check_key_is_gone(
    simulator: Simulator, celery_worker_process, alice, make_key, api_client
) -> None:
    client = api_client(make_key(alice))
    rental = rent(simulator, client, 2, "verified")
    assert rental["fabric_check"]["status"] == "running"

    ready = wait_for_status(client, rental["id"], {"ready", "check_failed"})

    assert ready["status"] == "ready"
    check = ready["fabric_check"]
    assert check["status"] == "passed" and check["slow_members"] == []
    assert check["bus_bandwidth_gbps"] == pytest.approx(2880) and check["floor_gbps"] == pytest.approx(2240)
    stored = Rental.objects.get(public_id=rental["id"])
    keys = json.loads(bytes(stored.request_body))["user_public_key"]
    assert keys == [SSH_KEY, stored.fabric_check.public_key_line], "the check's key is in the stored body"
    assert authorized_keys(simulator, ready) == [[SSH_KEY], [SSH_KEY]], "only the customer's key is left"
    assert stored.fabric_check.private_key_encrypted == "", "the private key is destroyed after the check"


def test_a_slow_member_is_named_and_renting_again_excludes_it(
    simulator: Simulator, celery_worker_process, alice, make_key, api_client
) -> None:
    client = api_client(make_key(alice))
    rental = rent(simulator, client, 3, "slowone")
    slow = rental["executor_ids"][1]
    simulator.http.post("/_sim/config", json={"slow_executors": [slow]}).raise_for_status()

    failed = wait_for_status(client, rental["id"], {"ready", "check_failed"})

    assert failed["status"] == "check_failed"
    assert failed["fabric_check"]["status"] == "failed"
    assert [member["executor_id"] for member in failed["fabric_check"]["slow_members"]] == [slow]
    assert all(keys == [SSH_KEY] for keys in authorized_keys(simulator, failed))

    again = fabric_check_rent_again(rental=Rental.objects.get(public_id=rental["id"]), user=alice)
    assert fabric_check_rent_again(rental=Rental.objects.get(public_id=rental["id"]), user=alice) == again

    replaced = wait_for_status(client, str(again.public_id), {"ready", "check_failed"})
    assert replaced["status"] == "ready" and replaced["fabric_check"]["status"] == "passed"
    assert slow not in replaced["executor_ids"] and len(replaced["executor_ids"]) == 3
    assert wait_for_status(client, rental["id"], {"terminated"})["status"] == "terminated"
    assert len(simulator.ledger()) == 2, "one rent for the failed cluster, one for its replacement"


def test_a_customer_who_does_not_opt_in_is_never_connected_to(
    simulator: Simulator, celery_worker_process, alice, make_key, api_client
) -> None:
    client = api_client(make_key(alice))
    rental = rent(simulator, client, 2, "plain", verify=False)

    ready = wait_for_status(client, rental["id"], {"ready"})

    assert ready["fabric_check"] is None
    assert authorized_keys(simulator, ready) == [[SSH_KEY], [SSH_KEY]]
    stored = Rental.objects.get(public_id=rental["id"])
    assert json.loads(bytes(stored.request_body))["user_public_key"] == [SSH_KEY]
    assert not hasattr(stored, "fabric_check") and stored.status == "ready"


def test_verify_fabric_defaults_to_the_customers_setting_and_is_validated(
    simulator: Simulator, alice, acme, make_key, api_client
) -> None:
    client = api_client(make_key(alice))
    acme.verify_fabric_default = True
    acme.save()
    fabric_id = simulator.offers()[0]["fabric_id"]
    body = {"fabric_id": fabric_id, "node_count": 2, "pod_name": "dflt", "ssh_public_keys": [SSH_KEY]}

    wrong = client.post("/rentals", json={**body, "verify_fabric": "yes"})
    by_default = client.post("/rentals", json=body)
    declined = client.post("/rentals", json={**body, "pod_name": "nope", "verify_fabric": False})

    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "validation_error"
    assert "verify_fabric" in wrong.text
    assert by_default.status_code == 201 and by_default.json()["fabric_check"]["status"] == "running"
    assert declined.status_code == 201 and declined.json()["fabric_check"] is None
