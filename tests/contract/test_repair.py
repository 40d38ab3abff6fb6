"""Pod repair (docs/upstream-api.md §17): `POST /pods/{id}/reboot` and the `reset-gpu` request and its poll."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api

pytestmark = [pytest.mark.sim_only, pytest.mark.rents]


def running_pod(api: Api) -> dict[str, Any]:
    r = api.rent(api.order(api.cheapest(2)))
    assert r.status_code == 200, r.text
    api.advance(5)
    return next(pod for pod in api.pods() if pod["id"] == r.json()["pod_ids"][0])


def status_of(api: Api, pod_id: str) -> str:
    return next(pod["status"] for pod in api.pods() if pod["id"] == pod_id)


def post(api: Api, path: str, body: Any) -> Any:
    return api.http.post(path, json=body, headers=api.headers())


def test_a_reboot_goes_through_reboot_pending_back_to_running(api: Api) -> None:
    pod = running_pod(api)
    r = post(api, f"/pods/{pod['id']}/reboot", {})
    assert r.status_code == 200 and r.json()["status"] == "REBOOT_PENDING"
    assert status_of(api, pod["id"]) == "REBOOT_PENDING"
    assert post(api, f"/pods/{pod['id']}/reboot", {}).status_code == 409, "not while it reboots"
    api.advance(5)
    assert status_of(api, pod["id"]) == "RUNNING"
    events = [e["event_type"] for e in api.get(f"/pods/{pod['id']}/events").json()]
    assert events[-2:] == ["rebooting", "running"]


def test_a_failed_reboot_ends_reboot_failed(api: Api) -> None:
    pod = running_pod(api)
    api.faults({"fault": "reboot_failure", "next": 1})
    assert post(api, f"/pods/{pod['id']}/reboot", {"volume_id": "vol-1"}).status_code == 200
    api.advance(5)
    assert status_of(api, pod["id"]) == "REBOOT_FAILED"


def test_a_reboot_is_refused_with_a_bad_body_or_an_unknown_pod(api: Api) -> None:
    pod = running_pod(api)
    r = post(api, f"/pods/{pod['id']}/reboot", {"volume_id": 7})
    assert r.status_code == 422 and "volume_id" in r.text
    assert post(api, "/pods/nope/reboot", {}).status_code == 404


def test_a_gpu_reset_runs_then_reports_each_gpu(api: Api) -> None:
    pod = running_pod(api)
    r = post(api, f"/pods/{pod['id']}/reset-gpu", {"gpu_indices": [3, 0]})
    assert r.status_code == 202 and r.json()["status"] == "running"
    url = f"/pods/{pod['id']}/reset-gpu/{r.json()['request_id']}"
    assert api.get(url).json()["status"] == "running"
    api.advance(5)
    done = api.get(url).json()
    assert done["status"] == "done" and done["ok"] is True and done["error"] is None
    assert done["container_restarted"] is False
    assert [(gpu["index"], gpu["result"]) for gpu in done["gpus"]] == [(0, "reset"), (3, "reset")]
    assert all(gpu["uuid"].startswith("GPU-") and gpu["detail"] for gpu in done["gpus"])


def test_one_gpu_reset_a_minute(api: Api) -> None:
    pod = running_pod(api)
    assert post(api, f"/pods/{pod['id']}/reset-gpu", {"gpu_indices": None}).status_code == 202
    r = post(api, f"/pods/{pod['id']}/reset-gpu", {"gpu_indices": None})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    api.advance(60)
    r = post(api, f"/pods/{pod['id']}/reset-gpu", {"gpu_indices": None})
    assert r.status_code == 202
    api.advance(5)
    assert len(api.get(f"/pods/{pod['id']}/reset-gpu/{r.json()['request_id']}").json()["gpus"]) == pod["gpu_count"]


def test_a_failed_gpu_reset_says_so(api: Api) -> None:
    pod = running_pod(api)
    api.faults({"fault": "reset_gpu_failure", "next": 1})
    r = post(api, f"/pods/{pod['id']}/reset-gpu", {"gpu_indices": [1]})
    api.advance(5)
    done = api.get(f"/pods/{pod['id']}/reset-gpu/{r.json()['request_id']}").json()
    assert done["status"] == "failed" and done["ok"] is False and done["error"]["code"]
    assert done["gpus"][0]["result"] == "failed"


@pytest.mark.parametrize("indices", [[], [8], [-1], ["0"], [True], "all"])
def test_a_gpu_reset_checks_its_indices(api: Api, indices: Any) -> None:
    pod = running_pod(api)
    r = post(api, f"/pods/{pod['id']}/reset-gpu", {"gpu_indices": indices})
    assert r.status_code == 422 and "gpu_indices" in r.text


def test_an_unknown_gpu_reset_is_404(api: Api) -> None:
    pod = running_pod(api)
    assert api.get(f"/pods/{pod['id']}/reset-gpu/nope").status_code == 404
