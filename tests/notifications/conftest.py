"""Fixtures for webhooks and e-mail: a real HTTP receiver on 127.0.0.1 and a rental moved through its states (the
rentals themselves come from the root conftest's `make_rental`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """An HTTP server in a thread that records every request and answers from a script of statuses."""

    url: str
    requests: list[Received] = field(default_factory=list)
    # (status, body, extra headers) answered in order; the last one repeats.
    answers: list[tuple[int, bytes, dict[str, str]]] = field(default_factory=lambda: [(200, b"thanks", {})])

    def answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.answers = [(status, body, headers or {})]

    def then(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.answers.append((status, body, headers or {}))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state: dict[str, Receiver] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            me = state["receiver"]
            with lock:
                me.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, answer, headers = me.answers[0] if len(me.answers) == 1 else me.answers.pop(0)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["receiver"] = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hook")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state["receiver"]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def deliveries_enqueued(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, float | None]]:
    """Record what would be enqueued instead of writing broker messages; tests run deliveries themselves.

    End-to-end tests (marked e2e) keep the real broker: a real worker delivers.
    """
    enqueued: list[tuple[int, float | None]] = []
    if request.node.get_closest_marker("e2e"):
        return enqueued

    def record(delivery_id: int, countdown: float | None = None) -> None:
        enqueued.append((delivery_id, countdown))

    for where in ("notifications.services", "notifications.delivery", "notifications.tasks"):
        monkeypatch.setattr(f"{where}.delivery_enqueue", record)
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    return enqueued


@pytest.fixture
def move_rental():  # type: ignore[no-untyped-def]
    """Return a function that moves a rental sending → rented through the one transition function."""
    from rentals.models import Rental
    from rentals.transitions import rental_transition

    def go(rental, to_status: str = "rented", from_status: str | None = None) -> bool:  # type: ignore[no-untyped-def]
        # A cluster belongs to one rental (a unique cluster_id): the first rented here gets c-1, later ones their own.
        taken = Rental.objects.filter(cluster_id="c-1").exclude(pk=rental.pk).exists()
        cluster = f"c-{rental.pk}" if taken else "c-1"
        pods = ["p-1", "p-2"] if not taken else [f"p-{rental.pk}-1", f"p-{rental.pk}-2"]
        fields: dict[str, Any] = {"pod_ids": pods, "cluster_id": cluster} if to_status == "rented" else {}
        return rental_transition(
            rental_id=rental.pk, from_status=from_status or rental.status, to_status=to_status, **fields
        )

    return go


def deliver_all() -> list[str]:
    """Run every due delivery once, as the worker would; return the outcomes."""
    from notifications.delivery import delivery_attempt
    from notifications.models import Delivery

    ids = Delivery.objects.filter(status="pending").values_list("pk", flat=True)
    return [delivery_attempt(delivery_id=pk) for pk in ids]


@pytest.fixture
def admins() -> Any:
    """Return a function that makes users admins of their customers (only admins add or delete endpoints)."""
    from billing.models import CustomerAdmin

    def make(*users: Any) -> None:
        for user in users:
            for membership in user.memberships.all():
                CustomerAdmin.objects.get_or_create(membership=membership)

    return make
