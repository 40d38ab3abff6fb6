"""`POST /machine-requests` (Lium's demand signal, upstream-api.md §17) and our `GET /machine-requests`.

The name is resolved as the SDK documents it, from a part such as `H100` to the one full machine name that holds
it; `provider_notified_count` is the number of fabrics offering that machine (our choice: the simulator has no
providers). `GET` lists the caller's account's requests, newest last: on Lium it exists only on the provider
portal; here it lets a test see what was asked.
"""

from __future__ import annotations

import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from .clock import iso
from .errors import ApiError, field_error
from .httpkit import json_body, json_response
from .routes_api import _auth
from .state import State


def create(state: State, request: Request) -> Response:
    cred = _auth(state, request, "machine-requests")
    body = json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_json", "Body must be a JSON object")
    wanted, gpu_count = body.get("machine_name"), body.get("gpu_count")
    if not isinstance(wanted, str) or not 1 <= len(wanted.strip()) <= 100:
        raise field_error("machine_name", "give a machine name such as B300 or 4090 (1 to 100 characters)")
    if gpu_count is not None and (
        isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or not 1 <= gpu_count <= 16
    ):
        raise field_error("gpu_count", "must be a whole number from 1 to 16")
    with state.lock:
        names = sorted({node["machine_name"] for fab in state.fabrics for node in fab["nodes"]})
        found = [name for name in names if wanted.strip().casefold() in name.casefold()]
        if len(found) != 1:
            message = f"No machine matches {wanted!r}" if not found else f"{wanted!r} matches {len(found)} machines"
            raise ApiError(
                404 if not found else 422, "machine_not_found" if not found else "ambiguous_machine", message
            )
        fabrics = sum(1 for fab in state.fabrics if any(n["machine_name"] == found[0] for n in fab["nodes"]))
        row: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "machine_name": found[0],
            "gpu_count": gpu_count,
            "achieved": False,
            "created_at": iso(state.clock.now()),
            "account_id": cred["account_id"],
        }
        state.machine_requests.append(row)
    answer = {"provider_notified_count": fabrics, "confirmation": f"Providers of {found[0]} were told it is wanted."}
    return json_response(answer)


def listing(state: State, request: Request) -> Response:
    cred = _auth(state, request, "machine-requests")
    with state.lock:
        rows = [
            {key: value for key, value in row.items() if key != "account_id"}
            for row in state.machine_requests
            if row["account_id"] == cred["account_id"]
        ]
    return json_response(rows)
