"""`GET /executors/deployment-estimate` (upstream-api.md §17) and the simulator's slow-executor switch."""

from __future__ import annotations

import pytest

from .conftest import Api


def _cluster_template(api: Api) -> str:
    r = api.get("/templates")
    assert r.status_code == 200, r.text
    return next(t["id"] for t in r.json() if t["docker_image"].startswith("daturaai/lium-cluster"))


def _estimate(api: Api, executor_id: str, template_id: str) -> dict:
    r = api.get("/executors/deployment-estimate", params={"executor_id": executor_id, "template_id": template_id})
    assert r.status_code == 200, r.text
    return r.json()


def test_estimate_has_the_documented_fields_and_types(api: Api) -> None:
    body = _estimate(api, api.cheapest(1)[0], _cluster_template(api))
    assert isinstance(body["estimated_seconds"], int) and not isinstance(body["estimated_seconds"], bool)
    assert isinstance(body["is_slow_machine"], bool)
    assert body["warning_message"] is None or isinstance(body["warning_message"], str)
    assert isinstance(body["is_cached_template"], bool)
    assert body["docker_image_size"] is None or isinstance(body["docker_image_size"], int)


@pytest.mark.sim_only
def test_estimate_is_the_start_delay_and_a_slow_mark_adds_to_it_with_a_warning(api: Api) -> None:
    api.config(start_seconds=20)
    slow, normal = api.cheapest(2)
    template = _cluster_template(api)
    api.sim("POST", "slow-executors", {"executor_ids": [slow], "extra_seconds": 40, "warning_message": "Disk is slow"})
    assert _estimate(api, normal, template) | {"docker_image_size": None} == {
        "estimated_seconds": 20,
        "is_slow_machine": False,
        "warning_message": None,
        "is_cached_template": True,
        "docker_image_size": None,
    }
    marked = _estimate(api, slow, template)
    assert (marked["estimated_seconds"], marked["is_slow_machine"], marked["warning_message"]) == (
        60,
        True,
        "Disk is slow",
    )


@pytest.mark.sim_only
@pytest.mark.rents
def test_a_slow_node_really_starts_later(api: Api) -> None:
    api.config(start_seconds=5)
    slow, normal = api.cheapest(2)
    api.sim("POST", "slow-executors", {"executor_ids": [slow], "extra_seconds": 30})
    assert api.rent(api.order([slow, normal])).status_code == 200
    api.advance(6)
    by_node = {p["executor"]["id"]: p for p in api.pods()}
    assert by_node[normal]["status"] == "RUNNING"
    assert by_node[slow]["status"] == "PENDING"
    assert 0 < by_node[slow]["estimated_ready_seconds"] <= 30
    api.advance(30)
    assert {p["status"] for p in api.pods()} == {"RUNNING"}


@pytest.mark.sim_only
def test_clearing_and_reset_forget_slow_marks(api: Api) -> None:
    node = api.cheapest(1)[0]
    api.sim("POST", "slow-executors", {"executor_ids": [node]})
    assert node in api.sim("GET", "slow-executors")
    assert api.sim("DELETE", "slow-executors") == {}
    api.sim("POST", "slow-executors", {"executor_ids": [node]})
    api.sim("POST", "reset")
    assert api.sim("GET", "slow-executors") == {}


@pytest.mark.sim_only
@pytest.mark.parametrize(
    "body",
    [{}, {"executor_ids": []}, {"executor_ids": ["no-such-node"]}, {"executor_ids": "x"}, {"extra_seconds": -1}],
)
def test_slow_switch_refuses_a_bad_body(api: Api, body: dict) -> None:
    r = api.http.post("/_sim/slow-executors", json=body)
    assert r.status_code == 422, r.text


@pytest.mark.sim_only  # which status a missing or unknown id gets is our choice [INF]
def test_estimate_needs_both_ids_and_known_ones(api: Api) -> None:
    node, template = api.cheapest(1)[0], _cluster_template(api)
    missing = api.get("/executors/deployment-estimate", params={"executor_id": node})
    assert missing.status_code == 422
    unknown = api.get("/executors/deployment-estimate", params={"executor_id": "no-such-node", "template_id": template})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"]


def test_estimate_needs_a_credential(api: Api) -> None:
    r = api.http.get("/executors/deployment-estimate", params={"executor_id": "x", "template_id": "y"})
    assert r.status_code == 401


@pytest.mark.sim_only
def test_estimate_route_takes_injected_faults(api: Api) -> None:
    api.faults({"fault": "error_before_commit", "route": "estimate", "next": 1, "status": 503})
    node, template = api.cheapest(1)[0], _cluster_template(api)
    r = api.get("/executors/deployment-estimate", params={"executor_id": node, "template_id": template})
    assert r.status_code == 503
