"""`GET /v1/shared-config` (Lium's cluster switch), `GET /users/me/events` and the simulator's out-of-band changes."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api

EVENT_FIELDS = {"created_at", "event_type", "sub_event_type", "detail", "error", "pod_id", "pod_name", "actor"}


def _events(api: Api, key: str | None = None, **params: str) -> list[dict[str, Any]]:
    r = api.get("/users/me/events", key=key, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_shared_config_needs_no_credential_and_reads_the_switch(api: Api) -> None:
    r = api.http.get("/v1/shared-config")
    assert r.status_code == 200, r.text
    body = r.json()
    assert {"machine_prices", "machine_min_price_rate", "machine_max_price_rate"} <= set(body)
    assert body.get("multinode_clusters_enabled", False) in (True, False)


@pytest.mark.sim_only
def test_switch_off_refuses_the_cluster_rent_with_403_and_rents_nothing(api: Api) -> None:
    api.config(multinode_clusters_enabled=False)
    assert api.http.get("/v1/shared-config").json()["multinode_clusters_enabled"] is False
    r = api.rent(api.order(api.cheapest(2)), idem="switch-off-1")
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "multinode_clusters_disabled"
    assert api.pods() == []
    api.config(multinode_clusters_enabled=True)
    assert api.rent(api.order(api.cheapest(2)), idem="switch-off-1").status_code == 200  # the refusal was not stored


@pytest.mark.sim_only
def test_switch_null_leaves_the_field_out(api: Api) -> None:
    api.config(multinode_clusters_enabled=None)
    assert "multinode_clusters_enabled" not in api.http.get("/v1/shared-config").json()


@pytest.mark.rents
def test_events_newest_first_with_the_fields_the_client_reads(api: Api) -> None:
    r = api.rent(api.order(api.cheapest(2)))
    assert r.status_code == 200, r.text
    pod_ids = r.json()["pod_ids"]
    rows = _events(api)
    assert rows and all(set(row) >= EVENT_FIELDS for row in rows)
    created = [row for row in rows if row["sub_event_type"] == "pod-create.started"]
    assert {row["pod_id"] for row in created} >= set(pod_ids)
    assert [row["created_at"] for row in rows] == sorted((row["created_at"] for row in rows), reverse=True)
    if not api.remote:
        assert created[0]["actor"] == {"auth": "api_key", "api_key_id": "key-main", "api_key_name": "dashboard"}
    one = _events(api, pod_id=pod_ids[0])
    assert {row["pod_id"] for row in one} == {pod_ids[0]}
    assert len(_events(api, limit="1")) == 1


def test_events_query_is_checked(api: Api) -> None:
    assert api.get("/users/me/events", params={"limit": "0"}).status_code == 422
    assert api.get("/users/me/events", params={"since": "yesterday"}).status_code == 422


@pytest.mark.sim_only
def test_since_is_inclusive_and_keeps_later_events(api: Api) -> None:
    pod_id = api.rent(api.order(api.cheapest(2))).json()["pod_ids"][0]
    first = _events(api)[0]
    api.advance(2)  # the pod starts running
    later = _events(api, since=first["created_at"])
    assert first in later  # the same instant comes back: a follower drops what it saw
    assert any(row["sub_event_type"] == "pod-lifecycle.status" and row["pod_id"] == pod_id for row in later)


@pytest.mark.sim_only
def test_backend_closed_to_api_keys_answers_401_to_keys_only(api: Api) -> None:
    api.config(events_for_api_keys=False)
    refused = api.get("/users/me/events")
    assert refused.status_code == 401 and refused.json()["success"] is False
    assert api.http.get("/users/me/events", headers={"Authorization": "Bearer sim-demo-token"}).status_code == 200


@pytest.mark.sim_only
def test_out_of_band_delete_by_the_portal_is_an_event_and_removes_the_pod(api: Api) -> None:
    pod_id = api.rent(api.order(api.cheapest(2))).json()["pod_ids"][0]
    done = api.sim("POST", "out-of-band", {"action": "delete_pod", "pod_id": pod_id, "actor": "portal"})
    assert done["actor"]["auth"] == "session"
    api.advance(2)
    assert pod_id not in {p["id"] for p in api.pods()}
    mine = _events(api, pod_id=pod_id)
    kinds = [row["sub_event_type"] for row in mine]
    assert kinds[:2] == ["pod-delete.success", "pod-delete.started"]
    assert {row["actor"]["auth"] for row in mine[:2]} == {"session"}


@pytest.mark.sim_only
def test_out_of_band_reboot_and_schedule_are_events_with_their_actor(api: Api) -> None:
    pod_id = api.rent(api.order(api.cheapest(2))).json()["pod_ids"][0]
    api.sim("POST", "out-of-band", {"action": "reboot_pod", "pod_id": pod_id, "actor": "cli"})
    at = "2031-01-01T00:00:00.000Z"
    body = {"action": "schedule_removal", "pod_id": pod_id, "actor": "api_key", "removal_scheduled_at": at}
    api.sim("POST", "out-of-band", body)
    rows = _events(api, pod_id=pod_id)
    assert rows[0]["sub_event_type"] == "pod-removal-schedule.set"
    assert rows[0]["detail"]["removal_scheduled_at"] == at and rows[0]["actor"]["auth"] == "api_key"
    assert rows[1]["sub_event_type"] == "pod-reboot.success" and rows[1]["actor"]["auth"] == "cli"
    assert next(p for p in api.pods() if p["id"] == pod_id)["removal_scheduled_at"] == at


@pytest.mark.sim_only
def test_scheduled_removal_is_the_platforms_event(api: Api) -> None:
    pod_id = api.rent(api.order(api.cheapest(2), termination_hours=1)).json()["pod_ids"][0]
    api.advance(3600 + 5)
    removal = [row for row in _events(api, pod_id=pod_id) if row["event_type"] == "pod-delete"]
    assert removal and all(row["actor"] is None for row in removal)
    assert any(row["detail"].get("reason") == "scheduled_removal" for row in removal)


@pytest.mark.sim_only
def test_out_of_band_is_checked(api: Api) -> None:
    r = api.http.post("/_sim/out-of-band", json={"action": "explode", "pod_id": "x"})
    assert r.status_code == 422
    r = api.http.post("/_sim/out-of-band", json={"action": "delete_pod", "pod_id": "nope", "actor": "portal"})
    assert r.status_code == 404
