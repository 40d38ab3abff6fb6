"""DELETE /clusters/{id}, schedule-removal and pod events."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from .conftest import Api

pytestmark = pytest.mark.rents


def _cluster(api: Api, count: int = 2, key: str | None = None) -> tuple[str, list[str], list[str]]:
    nodes = api.cheapest(count)
    r = api.rent(api.order(nodes), key=key)
    assert r.status_code == 200, r.text
    pod_ids = r.json()["pod_ids"]
    cluster_id = next(p["cluster_id"] for p in api.pods(key=key) if p["id"] in pod_ids)
    return cluster_id, pod_ids, nodes


def test_delete_cluster_rows_then_404(api: Api) -> None:
    cluster_id, pod_ids, nodes = _cluster(api, 3)
    r = api.http.delete(f"/clusters/{quote(cluster_id, safe='')}", headers=api.headers())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cluster_id"] == cluster_id and body["success"] is True and body["message"]
    assert sorted(row["pod_id"] for row in body["pods"]) == sorted(pod_ids)
    for row in body["pods"]:
        assert set(row) >= {"pod_id", "pod_name", "cluster_node_index", "success", "message"}
    if api.remote:
        return
    assert {p["status"] for p in api.pods()} == {"DELETING"}
    again = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers())
    assert again.status_code == 200
    assert {row["message"] for row in again.json()["pods"]} == {"Pod deletion is in progress"}
    api.advance(2)
    assert api.pods() == []
    free = {n["id"] for o in api.offers() for n in o["nodes"]}
    assert set(nodes) <= free  # the nodes are free again
    gone = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers())
    assert gone.status_code == 404
    assert gone.json()["success"] is False


def test_delete_unknown_cluster_is_404(api: Api) -> None:
    r = api.http.delete("/clusters/no-such-cluster%2Fid", headers=api.headers())
    assert r.status_code == 404


@pytest.mark.sim_only
def test_delete_by_other_account_is_403_and_removes_nothing(api: Api) -> None:
    cluster_id, _, _ = _cluster(api)
    r = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers("sim-other-key"))
    assert r.status_code == 403
    assert {p["status"] for p in api.pods()} == {"PENDING"}


@pytest.mark.sim_only
def test_delete_without_manage_scope(api: Api) -> None:
    cluster_id, _, _ = _cluster(api)  # created by key-main
    for key in ("sim-readonly-key", "sim-acme-key"):
        r = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers(key))
        assert r.status_code == 403
        assert "does not have the 'manage' scope" in r.json()["error"]["message"]
    assert {p["status"] for p in api.pods()} == {"PENDING"}
    # A key without 'manage' may remove the pods it created itself.
    own_cluster, _, _ = _cluster(api, key="sim-acme-key")
    assert api.http.delete(f"/clusters/{own_cluster}", headers=api.headers("sim-acme-key")).status_code == 200


@pytest.mark.sim_only
def test_delete_409_when_not_cancelling_inflight(api: Api) -> None:
    api.config(cancel_inflight_creates=False)
    cluster_id, pod_ids, _ = _cluster(api)
    r = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers())
    assert r.status_code == 409
    detail = r.json()["message"]
    assert detail["cluster_id"] == cluster_id and sorted(detail["pending_pods"]) == sorted(pod_ids)
    api.advance(2)
    assert api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).status_code == 200


@pytest.mark.sim_only
def test_member_delete_failure_is_reported_and_retryable(api: Api) -> None:
    cluster_id, _, _ = _cluster(api, 3)
    api.faults({"fault": "member_delete_failure", "next": 1})
    r = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers())
    body = r.json()
    assert r.status_code == 200 and body["success"] is False
    assert [row["success"] for row in body["pods"]] == [False, True, True]
    retry = api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).json()
    assert all(row["success"] for row in retry["pods"])


def test_schedule_removal_set_repeat_cancel(api: Api) -> None:
    _, pod_ids, _ = _cluster(api)
    when = "2099-01-01T00:00:00Z"
    url = f"/pods/{pod_ids[0]}/schedule-removal"
    first = api.http.post(url, json={"removal_scheduled_at": when}, headers=api.headers())
    assert first.status_code == 200, first.text
    assert first.json()["removal_scheduled_at"].startswith("2099-01-01T00:00:00")
    second = api.http.post(url, json={"removal_scheduled_at": when}, headers=api.headers())
    assert second.json() == first.json()
    pod = next(p for p in api.pods() if p["id"] == pod_ids[0])
    assert pod["removal_scheduled_at"].startswith("2099-01-01T00:00:00")
    cancel = api.http.delete(url, headers=api.headers())
    assert cancel.status_code == 200 and cancel.json()["removal_scheduled_at"] is None
    assert api.http.delete(url, headers=api.headers()).status_code == 200


@pytest.mark.sim_only
def test_schedule_removal_fires_on_sim_clock(api: Api) -> None:
    _, pod_ids, _ = _cluster(api)
    clock = api.sim("GET", "clock")
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(clock["epoch"] + 600, UTC).isoformat()
    api.http.post(f"/pods/{pod_ids[0]}/schedule-removal", json={"removal_scheduled_at": at}, headers=api.headers())
    api.advance(605)
    assert [p["id"] for p in api.pods()] == [pod_ids[1]]


@pytest.mark.sim_only
def test_schedule_removal_refusals(api: Api) -> None:
    _, pod_ids, _ = _cluster(api)
    url = f"/pods/{pod_ids[0]}/schedule-removal"
    assert api.http.post(url, json={"removal_scheduled_at": "soon"}, headers=api.headers()).status_code == 422
    assert (
        api.http.post(
            "/pods/nope/schedule-removal",
            json={"removal_scheduled_at": "2099-01-01T00:00:00Z"},
            headers=api.headers(),
        ).status_code
        == 404
    )
    other = api.http.post(
        url, json={"removal_scheduled_at": "2099-01-01T00:00:00Z"}, headers=api.headers("sim-other-key")
    )
    assert other.status_code == 404
    ro = api.http.post(
        url, json={"removal_scheduled_at": "2099-01-01T00:00:00Z"}, headers=api.headers("sim-readonly-key")
    )
    assert ro.status_code == 403


def test_pod_events(api: Api) -> None:
    _, pod_ids, _ = _cluster(api)
    r = api.get(f"/pods/{pod_ids[0]}/events")
    assert r.status_code == 200
    assert isinstance(r.json(), list)
    assert api.get("/pods/00000000-0000-0000-0000-000000000000/events").status_code == 404
