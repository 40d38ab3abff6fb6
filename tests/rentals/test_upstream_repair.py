"""The pod repair routes in the client (docs/upstream-api.md §17): what is sent, and strict reading of answers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from rentals import upstream
from tests.rentals.fakes import FakeUpstream, answer, error

pytestmark = pytest.mark.django_db

DONE: dict[str, Any] = {
    "request_id": "r-1",
    "status": "done",
    "ok": True,
    "container_restarted": False,
    "gpus": [
        {"index": 0, "uuid": "GPU-a", "result": "reset", "detail": "GPU reset"},
        {"index": 1, "uuid": "GPU-b", "result": "latch_cleared", "detail": ""},
    ],
    "error": None,
}


def test_a_reboot_posts_an_empty_object_to_the_pods_reboot_route(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script = [answer(200, {"pod_id": "p/1", "status": "REBOOT_PENDING"})]
    fake_upstream.client(acme.default_credential).pod_reboot("p/1")
    [sent] = fake_upstream.requests
    assert (sent.method, sent.url.raw_path, json.loads(sent.content)) == ("POST", b"/api/pods/p%2F1/reboot", {})


def test_a_gpu_reset_asks_for_every_gpu_and_reads_its_request_id(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script = [answer(202, {"request_id": "r-1", "status": "running"})]
    started = fake_upstream.client(acme.default_credential).pod_reset_gpu("p1")
    assert (started.request_id, started.status, started.final) == ("r-1", "running", False)
    assert json.loads(fake_upstream.requests[0].content) == {"gpu_indices": None}


def test_a_finished_reset_lists_each_gpus_result(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script = [answer(200, DONE)]
    status = fake_upstream.client(acme.default_credential).pod_reset_gpu_status("p1", "r-1")
    assert fake_upstream.requests[0].url.path == "/api/pods/p1/reset-gpu/r-1"
    assert status.final and status.ok is True
    assert [(gpu.index, gpu.result) for gpu in status.gpus] == [(0, "reset"), (1, "latch_cleared")]


@pytest.mark.parametrize(
    "body",
    [
        {"status": "running"},  # no request id
        {"request_id": "r-1", "status": "maybe"},
        {"request_id": "r-1", "status": "done", "ok": "yes"},
        {"request_id": "r-1", "status": "done", "gpus": [{"index": "0", "result": "reset"}]},
        {"request_id": "r-1", "status": "done", "gpus": [{"index": 0, "result": "melted"}]},
        {"request_id": "r-1", "status": "done", "gpus": {"0": "reset"}},
        {"request_id": "r-1", "status": "failed", "error": "boom"},
        ["r-1"],
    ],
)
def test_a_reset_answer_of_another_shape_is_malformed_not_a_result(acme, fake_upstream: FakeUpstream, body) -> None:  # type: ignore[no-untyped-def]
    fake_upstream.script = [answer(200, body)]
    with pytest.raises(upstream.MalformedAnswer):
        fake_upstream.client(acme.default_credential).pod_reset_gpu_status("p1", "r-1")


def test_a_second_reset_within_the_minute_is_rate_limited_with_its_wait(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script = [
        error(429, "rate_limited", "GPU reset is limited to one per minute", headers={"Retry-After": "42"})
    ]
    with pytest.raises(upstream.RateLimited) as raised:
        fake_upstream.client(acme.default_credential).pod_reset_gpu("p1")
    assert raised.value.retry_after == 42


def test_a_409_listing_gpus_reads_as_a_failed_reset(acme, fake_upstream: FakeUpstream) -> None:
    body = {"error": {"code": "gpu_reset_failed", "message": "a GPU failed", "data": {"gpus": DONE["gpus"][:1]}}}
    fake_upstream.script = [httpx.Response(409, json=body), httpx.Response(409, json={"error": {"code": "busy"}})]
    client = fake_upstream.client(acme.default_credential)
    failed = client.pod_reset_gpu_status("p1", "r-1")
    assert (failed.status, failed.ok, [gpu.index for gpu in failed.gpus]) == ("failed", False, [0])
    with pytest.raises(upstream.Conflict):
        client.pod_reset_gpu_status("p1", "r-1")
