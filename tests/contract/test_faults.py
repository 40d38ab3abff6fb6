"""Every injectable fault, seen over real HTTP."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from .conftest import Api

pytestmark = [pytest.mark.sim_only, pytest.mark.rents]


def _body(api: Api) -> bytes:
    return json.dumps(api.order(api.cheapest(2))).encode()


def test_faults_endpoint_roundtrip(api: Api) -> None:
    api.faults({"fault": "rate_limit", "next": 2, "retry_after": 3}, seed=7)
    shown = api.sim("GET", "faults")
    assert shown["seed"] == 7
    assert shown["rules"][0]["fault"] == "rate_limit" and shown["rules"][0]["route"] == "rent"
    r = api.http.delete("/_sim/faults")
    assert r.json()["rules"] == []
    bad = api.http.post("/_sim/faults", json={"rules": [{"fault": "nope"}]})
    assert bad.status_code == 422


def test_rate_limit_next_n(api: Api) -> None:
    api.faults({"fault": "rate_limit", "next": 2, "retry_after": 3})
    key, body = str(uuid.uuid4()), _body(api)
    for _ in range(2):
        r = api.rent_raw(body, idem=key)
        assert r.status_code == 429
        assert r.headers["Retry-After"] == "3"
    r = api.rent_raw(body, idem=key)
    assert r.status_code == 200
    assert "Idempotent-Replayed" not in r.headers


def test_rate_limit_on_other_route(api: Api) -> None:
    api.faults({"fault": "rate_limit", "route": "pods", "next": 1})
    assert api.get("/pods").status_code == 429
    assert api.get("/pods").status_code == 200


def test_latency(api: Api) -> None:
    api.faults({"fault": "latency", "route": "offers", "ms": [200, 250]})
    t = time.monotonic()
    assert api.get("/executors/infiniband-clusters").status_code == 200
    assert time.monotonic() - t >= 0.2


def test_error_before_commit_releases_key(api: Api) -> None:
    api.faults({"fault": "error_before_commit", "next": 1})
    key, body = str(uuid.uuid4()), _body(api)
    r = api.rent_raw(body, idem=key)
    assert r.status_code == 503
    assert api.pods() == [] and api.sim("GET", "ledger") == []
    r = api.rent_raw(body, idem=key)
    assert r.status_code == 200
    assert "Idempotent-Replayed" not in r.headers


def test_error_after_commit_is_stored_for_replay(api: Api) -> None:
    api.faults({"fault": "error_after_commit", "next": 1, "status": 502})
    key, body = str(uuid.uuid4()), _body(api)
    r = api.rent_raw(body, idem=key)
    assert r.status_code == 502
    assert len(api.pods()) == 2  # it committed
    again = api.rent_raw(body, idem=key)
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert set(again.json()["pod_ids"]) == {p["id"] for p in api.pods()}


def test_drop_after_commit_is_transport_error_and_replayable(api: Api) -> None:
    api.faults({"fault": "drop_after_commit", "next": 1})
    key, body = str(uuid.uuid4()), _body(api)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        api.rent_raw(body, idem=key)
    assert len(api.pods()) == 2
    again = api.rent_raw(body, idem=key)
    assert again.headers["Idempotent-Replayed"] == "true"
    log = api.sim("GET", "requests")
    assert log[0]["dropped"] is True and log[0]["status"] is None


def test_drop_before_commit_rents_nothing(api: Api) -> None:
    api.faults({"fault": "drop_before_commit", "next": 1})
    key, body = str(uuid.uuid4()), _body(api)
    with pytest.raises(httpx.TransportError):
        api.rent_raw(body, idem=key)
    assert api.pods() == []
    assert api.rent_raw(body, idem=key).status_code == 200


def test_probability_is_seeded_and_reproducible(api: Api) -> None:
    def run() -> list[int]:
        api.faults({"fault": "rate_limit", "route": "pods", "probability": 0.5}, seed=42)
        return [api.get("/pods").status_code for _ in range(20)]

    first = run()
    assert 429 in first and 200 in first
    assert run() == first


def test_member_start_failure(api: Api) -> None:
    api.faults({"fault": "member_start_failure", "next": 1, "node_index": 1})
    api.rent(api.order(api.cheapest(3)))
    api.advance(2)
    by_rank = {p["cluster_node_index"]: p for p in api.pods()}
    assert by_rank[0]["status"] == "RUNNING"
    assert by_rank[1]["status"] == "CREATION_FAILED"
    assert by_rank[1]["ssh_connect_cmd"] is None
    assert by_rank[2]["status"] == "RUNNING"
    events = api.get(f"/pods/{by_rank[1]['id']}/events").json()
    assert any(e["event_type"] == "creation_failed" for e in events)
    api.advance(181)  # a failed create is listed for about 3 minutes
    assert sorted(p["cluster_node_index"] for p in api.pods()) == [0, 2]


def test_pods_rate_limit_config(api: Api) -> None:
    api.config(pods_rate_limit_per_min=3)
    assert [api.get("/pods").status_code for _ in range(4)] == [200, 200, 200, 429]
    r = api.get("/pods")
    assert r.status_code == 429
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    # Other accounts have their own budget.
    assert api.get("/pods", key="sim-other-key").status_code == 200
    api.advance(61)
    assert api.get("/pods").status_code == 200


def test_pods_rate_limit_fault_rule(api: Api) -> None:
    api.faults({"fault": "pods_rate_limit", "per_min": 2})
    assert [api.get("/pods").status_code for _ in range(3)] == [200, 200, 429]


def test_default_pods_rate_limit_is_60(api: Api) -> None:
    codes = [api.get("/pods").status_code for _ in range(61)]
    assert codes.count(200) == 60 and codes[-1] == 429


def test_faults_given_at_start() -> None:
    from .conftest import start_simulator, stop_simulator

    rules = json.dumps({"seed": 1, "rules": [{"fault": "rate_limit", "route": "version", "next": 1}]})
    proc, url = start_simulator("--faults", rules)
    try:
        assert httpx.get(f"{url}/api/version").status_code == 429
        assert httpx.get(f"{url}/api/version").status_code == 200
    finally:
        stop_simulator(proc)
