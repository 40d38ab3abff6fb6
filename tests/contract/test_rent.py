"""Cluster rent: success, members in GET /pods, lifecycle, every refusal rule, customer refs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import SSH_KEY, Api, fake_ssh_key

pytestmark = pytest.mark.rents


def _snapshot(api: Api) -> dict[str, Any]:
    return {
        "free": {n["id"] for o in api.offers() for n in o["nodes"]},
        "pods": {p["id"] for p in api.pods()},
        "ledger": [] if api.remote else api.sim("GET", "ledger"),
    }


def _assert_unchanged(api: Api, before: dict[str, Any]) -> None:
    """Nothing was rented: no new pod, no node left the free list, no ledger entry."""
    after = _snapshot(api)
    assert after["pods"] <= before["pods"]
    assert before["free"] <= after["free"]
    assert after["ledger"] == before["ledger"]
    if not api.remote:
        assert after == before


def test_success_and_members_in_next_get_pods(api: Api) -> None:
    nodes = api.cheapest(3)
    r = api.rent(api.order(nodes))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True
    assert len(body["pod_ids"]) == 3
    members = [p for p in api.pods() if p["id"] in body["pod_ids"]]
    assert len(members) == 3
    cluster_ids = {p["cluster_id"] for p in members}
    assert len(cluster_ids) == 1 and None not in cluster_ids
    if "cluster_id" in body:
        assert cluster_ids == {body["cluster_id"]}
    by_rank = sorted(members, key=lambda p: p["cluster_node_index"])
    assert [p["cluster_node_index"] for p in by_rank] == [0, 1, 2]
    assert [p["executor"]["id"] for p in by_rank] == nodes  # rank follows request order
    assert [p["cluster_overlay_ip"] for p in by_rank] == ["10.42.0.1", "10.42.0.2", "10.42.0.3"]
    for pod in members:
        assert pod["status"] == "PENDING"
        assert pod["ssh_connect_cmd"] is None
        assert pod["pod_name"] == "contract-test"
        assert pod["phase"] in {
            "queued",
            "preparing node",
            "connecting to node",
            "pulling image",
            "creating volume",
            "starting container",
            "mounting encrypted volume",
            "configuring ssh",
        }
        assert pod["eta_basis"] in {"executor_history", "class_median", "cold_pull_estimate", "fleet_default"}
        assert isinstance(pod["estimated_ready_seconds"], int)
        assert pod["api_key_id"] == "key-main" or api.remote
        assert pod["template"]["docker_image"].startswith("daturaai/lium-cluster")
    # Rented nodes leave the free list.
    free = {n["id"] for o in api.offers() for n in o["nodes"]}
    assert not free & set(nodes)


@pytest.mark.sim_only
def test_price_is_node_total(api: Api) -> None:
    offer = api.offers()[0]
    node = min(offer["nodes"], key=lambda n: n["price_per_gpu"])
    other = next(n for n in offer["nodes"] if n["id"] != node["id"])
    api.rent(api.order([node["id"], other["id"]]))
    pod = next(p for p in api.pods() if p["executor"]["id"] == node["id"])
    assert pod["price"] == pytest.approx(node["price_per_gpu"] * node["gpu_count"])
    assert pod["gpu_count"] == node["gpu_count"]


@pytest.mark.sim_only
def test_pending_to_running_with_ssh_and_phase_progress(api: Api) -> None:
    api.config(start_seconds=80)
    r = api.rent(api.order(api.cheapest(2)))
    assert r.status_code == 200
    phases = [api.pods()[0]["phase"]]
    for _ in range(7):
        api.advance(10)
        pod = api.pods()[0]
        assert pod["status"] == "PENDING"
        phases.append(pod["phase"])
    assert phases[0] == "queued" and phases[-1] == "configuring ssh"
    assert len(set(phases)) == 8
    api.advance(10)
    for pod in api.pods():
        assert pod["status"] == "RUNNING"
        assert (
            pod["ssh_connect_cmd"] == f"ssh root@{pod['executor']['executor_ip_address']} -p "
            f"{pod['ports_mapping']['22']}"
        )
        assert pod["phase"] is None and pod["eta_basis"] is None and pod["estimated_ready_seconds"] is None


@pytest.mark.sim_only
def test_running_after_start_seconds_real_time(api: Api) -> None:
    import time

    # Pending at first (3 s is a generous margin for a busy machine), running once 3 s of real time have passed.
    api.config(start_seconds=3)
    rented_at = time.monotonic()
    api.rent(api.order(api.cheapest(2)))
    assert {p["status"] for p in api.pods()} == {"PENDING"}
    deadline = rented_at + 60
    while {p["status"] for p in api.pods()} != {"RUNNING"} and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the simulator until it says so, not hoping it did
    assert {p["status"] for p in api.pods()} == {"RUNNING"}
    assert time.monotonic() - rented_at >= 3


@pytest.mark.sim_only
def test_null_template_uses_newest_cluster_tag(api: Api) -> None:
    api.rent(api.order(api.cheapest(2), template_id=None))
    assert api.pods()[0]["template"]["docker_image_tag"] == "0.0.10"


@pytest.mark.sim_only
def test_explicit_older_cluster_template_is_accepted(api: Api) -> None:
    tpl = next(t for t in api.get("/templates").json() if t["docker_image_tag"] == "0.0.7")
    r = api.rent(api.order(api.cheapest(2), template_id=tpl["id"]))
    assert r.status_code == 200
    assert api.pods()[0]["template"]["docker_image_tag"] == "0.0.7"


def _refusals(api: Api) -> dict[str, tuple[dict[str, Any], str]]:
    offers = api.offers()
    a, b = api.cheapest(2, 0)
    c = api.cheapest(1, 1)[0]
    templates = api.get("/templates").json()
    non_cluster = next(t for t in templates if not t["docker_image"].startswith("daturaai/lium-cluster"))
    split = next((n["id"] for o in offers for n in o["nodes"] if n["available_gpu_count"] != n["gpu_count"]), None)
    base = api.order([a, b])
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "no_pod_name": ({k: v for k, v in base.items() if k != "pod_name"}, "validation_error"),
        "empty_pod_name": ({**base, "pod_name": ""}, "validation_error"),
        "bad_pod_name": ({**base, "pod_name": "has spaces!"}, "validation_error"),
        "long_pod_name": ({**base, "pod_name": "x" * 65}, "validation_error"),
        "no_executors": ({k: v for k, v in base.items() if k != "executor_uuids"}, "validation_error"),
        "one_node": ({**base, "executor_uuids": [a]}, "cluster_too_small"),
        "duplicates": ({**base, "executor_uuids": [a, a]}, "duplicate_executors"),
        "mixed_fabrics": ({**base, "executor_uuids": [a, c]}, "mixed_fabrics"),
        "unknown_node": (
            {**base, "executor_uuids": [a, "00000000-0000-0000-0000-000000000000"]},
            "executor_not_found",
        ),
        "gpu_split": ({**base, "gpu_count": 4}, "whole_nodes_only"),
        "no_template": (
            {**base, "template_id": "00000000-0000-0000-0000-000000000001"},
            "template_not_found",
        ),
        "non_cluster_image": ({**base, "template_id": non_cluster["id"]}, "cluster_image_required"),
        "dockerfile": ({**base, "dockerfile_content": "FROM ubuntu"}, "dockerfile_not_supported"),
        "no_ssh_key": ({k: v for k, v in base.items() if k != "user_public_key"}, "validation_error"),
        "empty_ssh_keys": ({**base, "user_public_key": []}, "validation_error"),
        "bad_ssh_type": ({**base, "user_public_key": ["ssh-dss AAAA"]}, "invalid_ssh_key"),
        "bad_ssh_base64": ({**base, "user_public_key": ["ssh-ed25519 !!!notbase64"]}, "invalid_ssh_key"),
        "ssh_type_mismatch": (
            {**base, "user_public_key": [fake_ssh_key().replace("ssh-ed25519", "ssh-rsa")]},
            "invalid_ssh_key",
        ),
        "termination_zero": ({**base, "termination_hours": 0}, "invalid_termination_hours"),
        "termination_too_long": ({**base, "termination_hours": 721}, "invalid_termination_hours"),
    }
    if split:
        whole = next(n["id"] for n in offers[2]["nodes"] if n["id"] != split)
        cases["split_host"] = ({**base, "executor_uuids": [whole, split]}, "whole_nodes_only")
    return cases


REFUSALS = [
    "no_pod_name",
    "empty_pod_name",
    "bad_pod_name",
    "long_pod_name",
    "no_executors",
    "one_node",
    "duplicates",
    "mixed_fabrics",
    "unknown_node",
    "gpu_split",
    "no_template",
    "non_cluster_image",
    "dockerfile",
    "no_ssh_key",
    "empty_ssh_keys",
    "bad_ssh_type",
    "bad_ssh_base64",
    "ssh_type_mismatch",
    "termination_zero",
    "termination_too_long",
    "split_host",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_refusal_changes_nothing(api: Api, case: str) -> None:
    cases = _refusals(api)
    if case not in cases:
        pytest.skip("no GPU-split host in this upstream's offers")
    order, code = cases[case]
    before = _snapshot(api)
    r = api.rent(order)
    assert 400 <= r.status_code < 500, r.text
    body = r.json()
    assert body["success"] is False
    assert body["status_code"] == r.status_code
    if not api.remote:
        assert body["error"]["code"] == code
    assert body["error"]["message"]
    _assert_unchanged(api, before)


@pytest.mark.sim_only
def test_refusal_messages_match_upstream_wording(api: Api) -> None:
    cases = _refusals(api)
    assert "mixed fabrics" in api.rent(cases["mixed_fabrics"][0]).json()["error"]["message"]
    assert api.rent(cases["gpu_split"][0]).json()["error"]["message"] == "A cluster rental must take whole nodes"
    r = api.rent(cases["no_pod_name"][0]).json()
    assert r["validation_errors"][0]["field"] == "pod_name"


def test_node_already_rented_is_refused(api: Api) -> None:
    a, b, c = api.cheapest(3)
    assert api.rent(api.order([a, b])).status_code == 200
    before = _snapshot(api)
    r = api.rent(api.order([b, c]))
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "executor_not_available" or api.remote
    _assert_unchanged(api, before)


def test_invalid_json_is_422(api: Api) -> None:
    r = api.rent_raw(b'{"pod_name": ')
    assert r.status_code == 422
    assert r.json()["success"] is False


@pytest.mark.sim_only
def test_unknown_fields_are_ignored(api: Api) -> None:
    r = api.rent(api.order(api.cheapest(2), surprise_field={"x": 1}, enable_backups=False, ncu_profiling=False))
    assert r.status_code == 200, r.text


@pytest.mark.sim_only
def test_termination_hours_sets_removal(api: Api) -> None:
    r = api.rent(api.order(api.cheapest(2), termination_hours=2))
    assert r.status_code == 200
    assert all(p["removal_scheduled_at"] for p in api.pods())


@pytest.mark.sim_only
def test_all_ssh_key_types_accepted(api: Api) -> None:
    import base64
    import struct

    def key(kind: str) -> str:
        blob = struct.pack(">I", len(kind)) + kind.encode() + b"\x00\x00\x00\x01x"
        return f"{kind} {base64.b64encode(blob).decode()}"

    kinds = [
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    ]
    r = api.rent(api.order(api.cheapest(2), user_public_key=[SSH_KEY, *[key(k) for k in kinds]]))
    assert r.status_code == 200, r.text


@pytest.mark.sim_only
def test_scope_budget_balance_refusals(api: Api) -> None:
    order = api.order(api.cheapest(2))
    r = api.rent(order, key="sim-readonly-key")
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "api_key_scope"
    assert r.json()["error"]["message"] == "API key 'readonly' does not have the 'rent' scope"
    r = api.rent(order, key="sim-capped-key")
    assert r.status_code == 402
    err = r.json()["error"]
    assert err["code"] == "API_KEY_BUDGET_EXCEEDED"
    assert set(err["data"]) == {"window", "budget_usd", "spent_usd", "api_key_id"}
    assert r.json()["message"]["window"] == "max"
    r = api.rent(order, key="sim-poor-key")
    assert r.status_code == 403
    err = r.json()["error"]
    assert err["code"] == "insufficient_balance"
    assert err["message"].startswith("Insufficient balance")
    assert "requires at least $" in err["message"] and "Your balance is $0.50." in err["message"]
    assert api.sim("GET", "ledger") == []
    assert api.pods() == []


@pytest.mark.sim_only
def test_bearer_rent_has_no_key_attribution(api: Api) -> None:
    r = api.http.post(
        "/executors/cluster/rent",
        content=json.dumps(api.order(api.cheapest(2))),
        headers={"Authorization": "Bearer sim-demo-token"},
    )
    assert r.status_code == 200, r.text
    pod = api.pods()[0]
    assert pod["api_key_id"] is None and pod["api_key_name"] is None


@pytest.mark.sim_only
def test_customer_ref_header_overrides_key(api: Api) -> None:
    r = api.rent(api.order(api.cheapest(2)), key="sim-acme-key", ref="tenant:42@eu-1.a_b")
    assert r.status_code == 200, r.text
    pods = api.pods(key="sim-acme-key")
    assert {p["customer_ref"] for p in pods} == {"tenant:42@eu-1.a_b"}
    assert api.sim("GET", "ledger")[0]["customer_ref"] == "tenant:42@eu-1.a_b"
    assert api.sim("GET", "requests")[0]["customer_ref"] == "tenant:42@eu-1.a_b"


@pytest.mark.sim_only
def test_customer_ref_falls_back_to_key(api: Api) -> None:
    assert api.rent(api.order(api.cheapest(2)), key="sim-acme-key").status_code == 200
    assert {p["customer_ref"] for p in api.pods(key="sim-acme-key")} == {"acme-from-key"}
    assert api.rent(api.order(api.cheapest(2))).status_code == 200
    main_pods = [p for p in api.pods() if p["api_key_id"] == "key-main"]
    assert {p["customer_ref"] for p in main_pods} == {None}


@pytest.mark.sim_only
def test_own_visibility_and_api_key_filter(api: Api) -> None:
    api.rent(api.order(api.cheapest(2)), key="sim-acme-key")
    api.rent(api.order(api.cheapest(2)))
    assert len(api.pods()) == 4
    assert {p["api_key_id"] for p in api.pods(key="sim-acme-key")} == {"key-acme"}
    assert {p["api_key_id"] for p in api.pods(api_key_id="key-main")} == {"key-main"}
    assert api.pods(key="sim-other-key") == []


@pytest.mark.sim_only
@pytest.mark.parametrize("ref", ["", "x" * 65, "has space", "semi;colon", "ü"])
def test_customer_ref_validation(api: Api, ref: str) -> None:
    # Bytes, so a non-ASCII value reaches the server as raw UTF-8.
    r = api.rent_raw(json.dumps(api.order(api.cheapest(2))).encode(), headers={"X-Customer-Ref": ref.encode()})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_customer_ref"
    assert "X-Customer-Ref" in r.json()["error"]["message"]
    assert api.pods() == []
