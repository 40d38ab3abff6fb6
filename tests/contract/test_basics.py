"""Auth, request ids, version, offers, templates, account and SSH keys."""

from __future__ import annotations

import re

import httpx
import pytest

from .conftest import SSH_KEY, Api, start_simulator, stop_simulator


def test_version_lists_rent_idempotency(api: Api) -> None:
    r = api.get("/version")
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body["features"], list)
    assert "rent_idempotency" in body["features"]


@pytest.mark.parametrize("header", ["X-API-Key", "X-API-KEY", "x-api-key"])
def test_api_key_header_any_case(api: Api, header: str) -> None:
    r = api.http.get("/pods", headers={header: api.key})
    assert r.status_code == 200, r.text


@pytest.mark.sim_only
def test_bearer_token(api: Api) -> None:
    r = api.http.get("/users/me", headers={"Authorization": "Bearer sim-demo-token"})
    assert r.status_code == 200
    assert r.json()["id"] == "acct-main"


@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "wrong-key"}, {"Authorization": "Bearer nope"}])
def test_401_envelope(api: Api, headers: dict[str, str]) -> None:
    r = api.http.get("/pods", headers=headers)
    assert r.status_code == 401
    body = r.json()
    assert body["success"] is False
    assert body["status_code"] == 401
    assert set(body["error"]) >= {"code", "message", "hint", "request_id"}
    assert body["error"]["request_id"] == r.headers["X-Request-Id"]
    assert "message" in body


def test_request_id_on_every_response(api: Api) -> None:
    responses = [
        api.get("/version"),
        api.get("/pods"),
        api.http.get("/pods"),
        api.get("/no/such/route"),
        api.rent_raw(b"{not json"),
        api.http.delete("/clusters/none", headers=api.headers()),
    ]
    ids = [r.headers.get("X-Request-Id") for r in responses]
    assert all(i and re.fullmatch(r"req_[0-9a-f]+", i) for i in ids), ids
    assert len(set(ids)) == len(ids)


@pytest.mark.sim_only
def test_request_id_on_control_routes_and_both_prefixes(api: Api) -> None:
    root = api.base_url.removesuffix("/api")
    for url in (f"{root}/version", f"{root}/api/version", f"{root}/_sim/clock", f"{root}/api/_sim/clock"):
        r = httpx.get(url)
        assert r.status_code == 200, url
        assert r.headers["X-Request-Id"].startswith("req_")


def test_offers_shape(api: Api) -> None:
    offers = api.offers()
    assert isinstance(offers, list) and offers
    types = set()
    for offer in offers:
        assert set(offer) >= {
            "fabric_id",
            "fabric_type",
            "link_rate",
            "fabric_measured",
            "node_count",
            "nodes",
        }
        types.add(offer["fabric_type"])
        assert offer["node_count"] >= len(offer["nodes"])
        for node in offer["nodes"]:
            for field in (
                "id",
                "executor_ip_address",
                "machine_name",
                "gpu_count",
                "price_per_gpu",
                "location",
                "status",
                "tier",
                "specs",
                "available_gpu_count",
                "min_gpu_count_for_rental",
                "interconnect",
                "nvlink",
                "effective_upload_speed_mbps",
                "effective_download_speed_mbps",
                "max_cuda_version",
                "reliability_score",
                "frequent_rent_failures",
                "last_verified_at",
                "gpu_power_limited",
                "gpu_power_limit_w",
            ):
                assert field in node, field
            spec = node["specs"]
            assert spec["gpu"]["count"] and spec["gpu"]["details"][0]["name"] and spec["gpu"]["details"][0]["capacity"]
            assert {"cpu", "ram", "hard_disk"} <= set(spec)
            assert {"country", "country_code"} <= set(node["location"])


@pytest.mark.sim_only
def test_seed_has_both_fabric_types_and_stable_ids(api: Api) -> None:
    offers = api.offers()
    assert len(offers) >= 4
    assert {o["fabric_type"] for o in offers} == {"infiniband", "roce"}
    assert offers[0]["fabric_id"] == "hot:infiniband:0x3:0x7fff:NVIDIA H100 80GB HBM3:8"
    assert any(o["node_count"] > len(o["nodes"]) for o in offers)
    first = [n["id"] for n in offers[0]["nodes"]]
    api.sim("POST", "reset")
    assert [n["id"] for n in api.offers()[0]["nodes"]] == first


def _tag_key(tag: str) -> list[tuple[int, int | str]]:
    return [(1, int(p)) if p.isdigit() else (0, p) for p in re.split(r"[.-]", tag or "latest")]


def test_templates_have_several_cluster_tags(api: Api) -> None:
    r = api.get("/templates")
    assert r.status_code == 200
    rows = r.json()
    cluster = [t for t in rows if t["docker_image"].startswith("daturaai/lium-cluster")]
    assert len(cluster) >= 2
    assert any(not t["docker_image"].startswith("daturaai/lium-cluster") for t in rows)
    newest = max(cluster, key=lambda t: _tag_key(t.get("docker_image_tag") or "latest"))
    if not api.remote:
        assert newest["docker_image_tag"] == "0.0.10"  # beats 0.0.7 and latest


def test_users_me_has_balance(api: Api) -> None:
    r = api.get("/users/me")
    assert r.status_code == 200
    assert isinstance(r.json()["balance"], int | float)


@pytest.mark.sim_only
def test_ssh_keys_register_and_list(api: Api) -> None:
    assert api.get("/ssh-keys").json() == []
    r = api.http.post("/ssh-keys", json={"name": "cli-me@host", "public_key": SSH_KEY}, headers=api.headers())
    assert r.status_code == 200
    row = r.json()
    assert set(row) >= {"id", "name", "public_key", "created_at"}
    again = api.http.post("/ssh-keys", json={"name": "x", "public_key": SSH_KEY}, headers=api.headers())
    assert again.json()["id"] == row["id"]
    assert [k["id"] for k in api.get("/ssh-keys").json()] == [row["id"]]
    bad = api.http.post("/ssh-keys", json={"name": "x", "public_key": "ssh-ed25519 bm9wZQ=="}, headers=api.headers())
    assert bad.status_code == 422


@pytest.mark.sim_only
def test_prod_mode_hides_control_routes() -> None:
    proc, url = start_simulator("--mode", "prod")
    try:
        assert httpx.get(f"{url}/_sim/faults").status_code == 404
        assert httpx.post(f"{url}/api/_sim/reset").status_code == 404
        assert httpx.get(f"{url}/api/version").status_code == 200
    finally:
        stop_simulator(proc)
