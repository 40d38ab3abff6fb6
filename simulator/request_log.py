"""The request journal behind GET /_sim/requests: every public call, never a secret or a cookie value."""

from __future__ import annotations

import hashlib
from typing import Any

from werkzeug.wrappers import Request

from .clock import iso
from .state import State


def open_entry(state: State, request: Request, request_id: str, route: str) -> dict[str, Any]:
    """Record that a call arrived; the caller fills in its status (or ``dropped``) when it ends."""
    entry: dict[str, Any] = {
        "at": iso(state.clock.now()),
        "request_id": request_id,
        "route": route,
        "method": request.method,
        "path": request.path,
        "cookie": "Cookie" in request.headers,  # whether one was sent back; the value is never kept
        "status": None,
        "dropped": False,
    }
    if route == "rent":
        entry.update(
            {
                "idempotency_key": request.headers.get("Idempotency-Key"),
                "body_sha256": hashlib.sha256(request.get_data(cache=True)).hexdigest(),
                "customer_ref": None,
                "api_key_id": None,
                "replayed": False,
            }
        )
    with state.lock:
        state.request_log.append(entry)
        if route == "rent":
            state.requests.append(entry)  # rent calls are kept in full: chaos runs compare them with the ledger
    return entry


def view(state: State, route: str | None) -> list[dict[str, Any]]:
    """Return the rent calls (no route), every recent call (``*``) or one route's recent calls."""
    with state.lock:
        if route is None or route == "rent":
            rows = list(state.requests)
        elif route == "*":
            rows = list(state.request_log)
        else:
            rows = [e for e in state.request_log if e["route"] == route]
        return [dict(e) for e in rows]
