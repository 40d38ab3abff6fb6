"""`POST /machine-requests` (upstream-api.md §17), our `GET /machine-requests`, and the capacity a watch needs:
nodes taken and freed through `POST /_sim/config {"taken_executors": [...]}`."""

from __future__ import annotations

import json

import httpx
import pytest

from .conftest import Api


def _ask(api: Api, body: dict) -> httpx.Response:
    return api.http.post(
        "/machine-requests", content=json.dumps(body), headers=api.headers(**{"Content-Type": "application/json"})
    )


def test_a_machine_request_resolves_a_short_name_and_says_how_many_providers_were_told(api: Api) -> None:
    r = _ask(api, {"machine_name": "H100", "gpu_count": 8})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body["provider_notified_count"], int) and body["provider_notified_count"] >= 0
    assert body.get("confirmation") is None or isinstance(body["confirmation"], str)


@pytest.mark.sim_only
def test_the_requests_are_listed_for_the_account_with_the_full_name(api: Api) -> None:
    assert _ask(api, {"machine_name": "h100"}).status_code == 200
    rows = api.get("/machine-requests").json()
    assert [(row["machine_name"], row["gpu_count"], row["achieved"]) for row in rows] == [
        ("NVIDIA H100 80GB HBM3", None, False)
    ]
    assert api.get("/machine-requests", key="sim-other-key").json() == []  # another account's list


@pytest.mark.sim_only
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 422, "validation_error"),
        ({"machine_name": ""}, 422, "validation_error"),
        ({"machine_name": "H100", "gpu_count": "8"}, 422, "validation_error"),
        ({"machine_name": "B300"}, 404, "machine_not_found"),
        ({"machine_name": "NVIDIA"}, 422, "ambiguous_machine"),
    ],
)
def test_a_bad_machine_request_is_refused_with_the_envelope(api: Api, body: dict, status: int, code: str) -> None:
    r = _ask(api, body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


@pytest.mark.sim_only
def test_a_fault_rule_can_fail_the_machine_request_route(api: Api) -> None:
    api.faults({"route": "machine-requests", "fault": "error_before_commit", "status": 503})
    assert _ask(api, {"machine_name": "H100"}).status_code == 503


@pytest.mark.sim_only
def test_taken_nodes_leave_the_offers_are_refused_and_come_back_when_freed(api: Api) -> None:
    first, second = api.cheapest(2)
    api.config(taken_executors=[first, second])
    free = {node["id"] for offer in api.offers() for node in offer["nodes"]}
    assert first not in free and second not in free
    r = api.rent(api.order([first, second]))
    assert r.status_code == 409 and r.json()["error"]["code"] == "executor_not_available"
    api.config(taken_executors=[])
    free = {node["id"] for offer in api.offers() for node in offer["nodes"]}
    assert {first, second} <= free


@pytest.mark.sim_only
def test_taken_executors_must_be_a_list_of_ids(api: Api) -> None:
    r = api.http.post("/_sim/config", json={"taken_executors": "all"})
    assert r.status_code == 422
