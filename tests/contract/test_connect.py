"""What the connect panel and "why a member failed" read: `jupyter_url`, `ports_mapping`, pod events."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit

import pytest

from .conftest import Api

pytestmark = pytest.mark.rents


def _running_members(api: Api, **extra: object) -> list[dict]:
    r = api.rent(api.order(api.cheapest(2), **extra))
    assert r.status_code == 200, r.text
    pod_ids = r.json()["pod_ids"]
    api.advance(5)  # past --start-seconds: the members run
    members = [pod for pod in api.pods() if pod["id"] in pod_ids]
    assert [pod["status"] for pod in members] == ["RUNNING", "RUNNING"]
    return members


@pytest.mark.sim_only
def test_a_cluster_with_jupyter_gives_each_member_a_url_and_its_8888_port(api: Api) -> None:
    urls = set()
    for pod in _running_members(api, enable_jupyter=True):
        url = urlsplit(pod["jupyter_url"])
        assert url.scheme in ("http", "https") and url.hostname == pod["executor"]["executor_ip_address"]
        assert url.path == "/lab" and url.query.startswith("token=") and len(url.query) > len("token=") + 16
        ports = pod["ports_mapping"]
        assert all(isinstance(port, int) and 0 < port <= 65535 for port in ports.values())
        assert set(ports) == {"22", "8888"} and url.port == ports["8888"] and ports["8888"] != ports["22"]
        assert pod["ssh_connect_cmd"].endswith(f"-p {ports['22']}")
        urls.add(pod["jupyter_url"])
    assert len(urls) == 2, "each member has its own URL and token"


@pytest.mark.sim_only
def test_a_cluster_without_jupyter_has_no_url_and_only_ssh_mapped(api: Api) -> None:
    for pod in _running_members(api):
        assert pod["jupyter_url"] is None and pod["jupyter_installation_status"] is None
        assert list(pod["ports_mapping"]) == ["22"]


@pytest.mark.sim_only
def test_pod_events_say_what_happened_oldest_first(api: Api) -> None:
    pod = _running_members(api)[0]
    events = api.get(f"/pods/{pod['id']}/events").json()
    assert [event["event_type"] for event in events] == ["created", "running"]
    for event in events:
        assert event["pod_id"] == pod["id"] and event["message"] and event["id"]
        assert datetime.fromisoformat(event["created_at"].replace("Z", "+00:00")).tzinfo is not None
    assert events[0]["created_at"] <= events[1]["created_at"]


def test_a_cancelled_removal_is_gone_from_the_pod_row(api: Api) -> None:
    r = api.rent(api.order(api.cheapest(2), termination_hours=3))
    assert r.status_code == 200, r.text
    pod_id = r.json()["pod_ids"][0]
    row = next(pod for pod in api.pods() if pod["id"] == pod_id)
    assert row["removal_scheduled_at"] is not None, "termination_hours schedules each member's removal"
    url = f"/pods/{pod_id}/schedule-removal"
    assert api.http.delete(url, headers=api.headers()).status_code == 200
    row = next(pod for pod in api.pods() if pod["id"] == pod_id)
    assert row["removal_scheduled_at"] is None
