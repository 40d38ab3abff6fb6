"""Idempotency-Key semantics, exactly as the seed states them (per account, 24 h, raw bytes)."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import pytest

from .conftest import Api

pytestmark = pytest.mark.rents


def _body(api: Api, nodes: list[str] | None = None, **extra: object) -> bytes:
    return json.dumps(api.order(nodes or api.cheapest(2), **extra)).encode()


def test_replay_returns_stored_answer(api: Api) -> None:
    key, body = str(uuid.uuid4()), _body(api)
    before = len(api.pods())
    first = api.rent_raw(body, idem=key)
    assert first.status_code == 200
    assert "Idempotent-Replayed" not in first.headers
    again = api.rent_raw(body, idem=key)
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert len(api.pods()) == before + 2  # nothing new was rented


@pytest.mark.sim_only
def test_replayed_refusal(api: Api) -> None:
    key = str(uuid.uuid4())
    body = _body(api, termination_hours=9999)
    first = api.rent_raw(body, idem=key)
    assert first.status_code == 422
    again = api.rent_raw(body, idem=key)
    assert again.status_code == 422
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert again.headers["X-Request-Id"] != first.headers["X-Request-Id"]
    log = api.sim("GET", "requests")
    assert [e["replayed"] for e in log] == [False, True]
    assert [e["status"] for e in log] == [422, 422]


def test_different_body_is_422_reused(api: Api) -> None:
    key = str(uuid.uuid4())
    before = len(api.pods())
    assert api.rent_raw(_body(api), idem=key).status_code == 200
    r = api.rent_raw(_body(api), idem=key)  # other nodes: another body
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "idempotency_key_reused"
    assert len(api.pods()) == before + 2


@pytest.mark.sim_only
def test_raw_bytes_are_compared_not_json(api: Api) -> None:
    key = str(uuid.uuid4())
    order = api.order(api.cheapest(2))
    assert api.rent_raw(json.dumps(order).encode(), idem=key).status_code == 200
    r = api.rent_raw(json.dumps(order, indent=2).encode(), idem=key)  # same JSON, other bytes
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "idempotency_key_reused"


@pytest.mark.sim_only
def first_request_holds_the_key(api: Api) -> bool:
    """Whether the first request has claimed its key and is holding it (it took the slow_commit fault)."""
    return all(rule.get("remaining", 1) == 0 for rule in api.sim("GET", "faults")["rules"])


def test_concurrent_repeat_is_409_in_progress(api: Api) -> None:
    # The first request holds its key for 5 s: the repeat is sent once it is known to be held, not after a
    # sleep that hopes so, and 5 s leaves the repeat's round trip ample room on a busy machine.
    api.faults({"fault": "slow_commit", "next": 1, "seconds": 5.0})
    key, body = str(uuid.uuid4()), _body(api)
    results: dict[str, httpx.Response] = {}

    def first() -> None:
        with httpx.Client(base_url=api.base_url, timeout=10) as c:
            results["first"] = c.post(
                "/executors/cluster/rent", content=body, headers={**api.headers(), "Idempotency-Key": key}
            )

    t = threading.Thread(target=first)
    t.start()
    held = threading.Event()
    for _ in range(500):  # at most ~10 s: the simulator answers its control route in milliseconds
        if first_request_holds_the_key(api):
            held.set()
            break
        held.wait(0.02)
    assert held.is_set(), "the first request never reached the simulator"
    second = api.rent_raw(body, idem=key)
    t.join()
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "idempotency_in_progress"
    assert results["first"].status_code == 200
    third = api.rent_raw(body, idem=key)
    assert third.headers["Idempotent-Replayed"] == "true"
    assert len(api.sim("GET", "ledger")) == 1


@pytest.mark.sim_only
def test_keys_are_per_account(api: Api) -> None:
    key = str(uuid.uuid4())
    order = api.order(api.cheapest(2))
    assert api.rent(order, idem=key).status_code == 200
    # The same key and an equivalent order under another account is a new rent (nodes are taken → 409 fresh).
    other = api.rent(api.order(api.cheapest(2)), idem=key, key="sim-other-key")
    assert other.status_code == 200
    assert "Idempotent-Replayed" not in other.headers
    # Another key of the SAME account shares the record.
    same_acct = api.rent(order, idem=key, headers={"X-API-Key": "sim-acme-key"})
    assert same_acct.headers.get("Idempotent-Replayed") == "true"
    assert len(api.sim("GET", "ledger")) == 2


@pytest.mark.sim_only
def test_expires_after_24h(api: Api) -> None:
    key = str(uuid.uuid4())
    a, b = api.cheapest(2)
    body = _body(api, [a, b], termination_hours=1)
    assert api.rent_raw(body, idem=key).status_code == 200
    api.advance(23 * 3600)
    assert api.rent_raw(body, idem=key).headers.get("Idempotent-Replayed") == "true"
    api.advance(3600 + 60)  # past 24 h; the 1 h termination also freed the nodes
    r = api.rent_raw(body, idem=key)
    assert r.status_code == 200
    assert "Idempotent-Replayed" not in r.headers
    assert len(api.sim("GET", "ledger")) == 2


@pytest.mark.sim_only
def test_fresh_auth_scope_budget_refusals_are_not_stored(api: Api) -> None:
    key, body = str(uuid.uuid4()), _body(api)
    assert api.rent_raw(body, idem=key, key="sim-readonly-key").status_code == 403
    assert api.rent_raw(body, idem=key, key="bad-key").status_code == 401
    assert api.rent_raw(body, idem=key, key="sim-capped-key").status_code == 402
    r = api.rent_raw(body, idem=key)
    assert r.status_code == 200
    assert "Idempotent-Replayed" not in r.headers


@pytest.mark.sim_only
def test_outcome_unknown_is_409_forever(api: Api) -> None:
    api.faults({"fault": "outcome_unknown", "next": 1, "commit": True})
    key, body = str(uuid.uuid4()), _body(api)
    first = api.rent_raw(body, idem=key)
    assert first.status_code >= 500
    assert len(api.sim("GET", "ledger")) == 1  # it did rent
    for _ in range(2):
        r = api.rent_raw(body, idem=key)
        assert r.status_code == 409
        assert r.json()["error"]["code"] == "idempotency_outcome_unknown"
    api.advance(30 * 24 * 3600)
    assert api.rent_raw(body, idem=key).json()["error"]["code"] == "idempotency_outcome_unknown"


@pytest.mark.sim_only
def test_outcome_unknown_without_commit_rents_nothing(api: Api) -> None:
    api.faults({"fault": "outcome_unknown", "next": 1, "commit": False, "response": "drop"})
    key, body = str(uuid.uuid4()), _body(api)
    with pytest.raises(httpx.TransportError):
        api.rent_raw(body, idem=key)
    assert api.sim("GET", "ledger") == []
    assert api.rent_raw(body, idem=key).status_code == 409
