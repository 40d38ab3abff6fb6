"""Answers a sloppy gateway or backend gives: HTML pages, empty bodies, trickles, over-long ids, junk pod lists.

None of this is upstream fact; it is what our simulator does when a misbehaviour rule fires.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from typing import Any

from werkzeug.datastructures import Headers
from werkzeug.wrappers import Response

from .httpkit import dumps, json_response

MAINTENANCE_HTML = b"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Down for maintenance</title></head>
<body>
<h1>We&rsquo;ll be back soon</h1>
<p>The service is down for scheduled maintenance. Please try again in a few minutes.</p>
</body>
</html>
"""

# Rows that look like a pod list at a glance: missing fields, wrong types, not even objects.
JUNK_POD_ROWS: list[Any] = [
    {"id": 12345, "status": None, "pod_name": ["not", "a", "name"]},
    {"cluster_id": "cluster-without-pods", "cluster_node_index": "zero"},
    "pod-7f3a",
    None,
]

_PADDING = "0123456789abcdef" * 20  # 320 characters


def long_id(value: str) -> str:
    """Stretch an id past any sane column width; it still starts with the real id."""
    return f"{value}-{_PADDING}"


def html_response(status: int = 200) -> Response:
    """Return a maintenance page, as a gateway in front of the API might."""
    return Response(MAINTENANCE_HTML, status=status, mimetype="text/html")


def empty_response(status: int = 200) -> Response:
    """Return a success status with no body at all (still labelled JSON)."""
    return Response(b"", status=status, mimetype="application/json")


def malformed_pods(shape: str) -> Response:
    """Return a 200 GET /pods answer that is not a list of pod rows."""
    if shape == "html":
        return html_response()
    if shape == "junk_rows":
        return json_response(JUNK_POD_ROWS)
    return json_response({"detail": "maintenance", "message": "Pod listing is temporarily unavailable"})


def lengthen_pod_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return copies of pod rows whose id and cluster_id are over-long."""
    out = []
    for row in rows:
        row = dict(row)
        row["id"] = long_id(row["id"])
        if row.get("cluster_id"):
            row["cluster_id"] = long_id(row["cluster_id"])
        out.append(row)
    return out


def lengthen_answer(body: bytes, long_request_id: str) -> bytes:
    """Stretch a rent answer's pod_ids and cluster_id, or an envelope's request_id."""
    data = json.loads(body)
    if not isinstance(data, dict):
        return body
    if isinstance(data.get("pod_ids"), list):
        data["pod_ids"] = [long_id(p) for p in data["pod_ids"]]
    if isinstance(data.get("cluster_id"), str):
        data["cluster_id"] = long_id(data["cluster_id"])
    if isinstance(data.get("error"), dict) and "request_id" in data["error"]:
        data["error"]["request_id"] = long_request_id
    return dumps(data)


def cookie_header(name: str) -> str:
    """Return a Set-Cookie value with a fresh random session value."""
    return f"{name}={secrets.token_urlsafe(16)}; Path=/"


def trickle_response(
    body: bytes,
    status: int,
    headers: Headers | dict[str, str],
    *,
    interval: float,
    seconds: float,
    stop: threading.Event,
) -> Response:
    """Send the headers at once, then one whitespace byte per ``interval`` for ``seconds``, then ``body``.

    Leading whitespace keeps a JSON body valid, so a patient client still gets the real answer.
    ``stop`` ends the stream early (shutdown), leaving the client a short body.
    """
    pad = max(1, round(seconds / interval))

    def stream() -> Iterator[bytes]:
        yield b""  # Werkzeug sends the status line and headers on the first write
        for _ in range(pad):
            if stop.wait(interval):
                return
            yield b" "
        yield body

    response = Response(stream(), status=status, headers=Headers(headers), direct_passthrough=True)
    response.headers["Content-Length"] = str(pad + len(body))
    return response


def trickle_existing(response: Response, rule: dict[str, Any], stop: threading.Event) -> Response:
    """Re-send an already built response as a trickle."""
    headers = Headers(response.headers)
    headers.pop("Content-Length", None)
    return trickle_response(
        response.get_data(),
        response.status_code,
        headers,
        interval=float(rule.get("interval", 1.0)),
        seconds=float(rule.get("seconds", 120)),
        stop=stop,
    )
