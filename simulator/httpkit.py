"""HTTP helpers shared by the route modules: JSON responses, connection drops, common faults."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import struct
import time
from typing import Any

from werkzeug.wrappers import Request, Response

from .errors import ApiError, rate_limited
from .state import State

log = logging.getLogger("simulator")


class DropConnection(Exception):
    """Abort the exchange by closing the TCP connection without any response."""


def dumps(body: Any) -> bytes:
    """Serialise once; stored answers keep these exact bytes for replay."""
    return json.dumps(body, separators=(",", ":"), sort_keys=False).encode()


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Return a JSON response."""
    raw = body if isinstance(body, bytes) else dumps(body)
    return Response(raw, status=status, headers=headers or {}, mimetype="application/json")


def drop(environ: dict[str, Any]) -> None:
    """Reset the client's connection so it sees a transport error, never a status."""
    sock = environ.get("werkzeug.socket")
    if sock is None:
        return
    with contextlib.suppress(OSError):
        # SO_LINGER 0 turns close into an RST; shutdown makes Werkzeug's own write fail quietly.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)


def json_body(request: Request) -> Any:
    """Decode a JSON body, else 422 invalid_json; an empty body reads as {}."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(422, "invalid_json", f"Request body is not valid JSON: {exc}") from exc


def json_object(request: Request) -> dict[str, Any]:
    """Decode a body that must be a JSON object, else 422 invalid_json."""
    body = json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_json", "Body must be a JSON object")
    return body


def pre_faults(state: State, route: str) -> None:
    """Apply latency and rate_limit rules; both leave the world untouched."""
    rule = state.faults.take("latency", route)
    if rule:
        ms = rule.get("ms", 100)
        delay = state.faults.uniform(ms[0], ms[1]) if isinstance(ms, list) else float(ms)
        time.sleep(delay / 1000.0)
    rule = state.faults.take("rate_limit", route)
    if rule:
        raise rate_limited("Too many requests", int(rule.get("retry_after", 1)))


def before_commit_faults(state: State, route: str) -> None:
    """Fail before any change: a 5xx or a dropped connection."""
    rule = state.faults.take("error_before_commit", route)
    if rule:
        status = int(rule.get("status", 503))
        raise ApiError(status, "upstream_unavailable", "Service temporarily unavailable (injected before commit)")
    if state.faults.take("drop_before_commit", route):
        raise DropConnection()


def after_commit_faults(state: State, route: str) -> None:
    """Fail after the change is made: a 5xx or a dropped connection."""
    rule = state.faults.take("error_after_commit", route)
    if rule:
        status = int(rule.get("status", 502))
        raise ApiError(status, "bad_gateway", "Upstream error (injected after commit)")
    if state.faults.take("drop_after_commit", route):
        raise DropConnection()
