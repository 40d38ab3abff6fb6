"""Fakes for the rent engine's unit tests: upstream answers at the transport (the enqueue recorder and the clock,
shared by every folder, are in tests/doubles.py and named here too)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx

from rentals import upstream
from tests.doubles import EXECUTORS, Clock, Enqueued  # noqa: F401 (named here for the tests that import them from here)

BASE_URL = "http://lium.invalid/api"
RENT_URL = BASE_URL + "/executors/cluster/rent"

Handler = Callable[[httpx.Request], httpx.Response]


def answer(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """Build an upstream response with a JSON body."""
    return httpx.Response(status, json=body if body is not None else {}, headers=headers or {})


def error(
    status: int,
    code: str = "",
    message: str = "nope",
    *,
    request_id: str = "req-1",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Build the upstream's error envelope."""
    body = {
        "success": False,
        "error": {"code": code, "message": message, "hint": "", "request_id": request_id},
        "message": message,
        "status_code": status,
    }
    return httpx.Response(status, json=body, headers=headers or {})


REPLAYED = {"Idempotent-Replayed": "true"}


def rented(
    pod_ids: list[str] | None = None, cluster_id: str = "cl-1", headers: dict[str, str] | None = None
) -> httpx.Response:
    """Build the upstream's 200 for a cluster rent."""
    body = {"success": True, "message": "Cluster rented", "pod_ids": pod_ids or ["p1", "p2"], "cluster_id": cluster_id}
    return answer(200, body, headers={"X-Request-Id": "req-ok", **(headers or {})})


@dataclass
class FakeUpstream:
    """Answers upstream calls from a script of responses (or exceptions) and records what was sent."""

    script: list[httpx.Response | Exception | Handler] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    # What `GET /version` lists: no rent_idempotency unless a test asks for a backend that promises it.
    features: list[str] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if request.method == "GET" and request.url.path.endswith("/pods"):
            return httpx.Response(200, json=self.pods)
        if request.method == "GET" and request.url.path.endswith("/version"):
            return httpx.Response(200, json={"version": "fake", "features": self.features})
        if not self.script:
            raise AssertionError(f"unexpected upstream call {request.method} {request.url}")
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        if callable(step) and not isinstance(step, httpx.Response):
            return step(request)
        return step

    @property
    def rent_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "POST" and r.url.path.endswith("/cluster/rent")]

    @property
    def pod_listings(self) -> int:
        return sum(1 for r in self.requests if r.method == "GET" and r.url.path.endswith("/pods"))

    def client(self, credential: Any) -> upstream.LiumClient:
        return upstream.client_for(credential, http=httpx.Client(transport=httpx.MockTransport(self.handle)))


def send_args(args: tuple[object, ...]) -> tuple[int, ...]:
    """Return a recorded `rental_send` message's arguments (the rental id, maybe its turn) as the task takes them."""
    assert all(isinstance(arg, int) for arg in args), args
    return cast(tuple[int, ...], args)


def sent_body(request: httpx.Request) -> dict[str, Any]:
    return json.loads(request.content)
