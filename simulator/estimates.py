"""`GET /executors/deployment-estimate` and the `/_sim/slow-executors` switch behind it.

The estimate is the simulator's own start delay for that executor (`start_seconds`, plus the extra seconds of an
executor marked slow), so a rental started after reading it really takes that long (`rent.commit` uses
`start_delay` too). Image sizes and which templates count as cached are our choice [INF].
"""

from __future__ import annotations

import math
from typing import Any

from werkzeug.wrappers import Request, Response

from .errors import ApiError, field_error
from .httpkit import before_commit_faults, json_object, json_response, pre_faults
from .state import State

# The cluster image is kept on every node (cached); the others are pulled cold. Sizes in bytes, by category.
IMAGE_BYTES = {"cluster": 12_000_000_000, "pytorch": 9_500_000_000, "os": 80_000_000, "inference": 7_200_000_000}
DEFAULT_WARNING = "This machine has been slow to start containers lately."
MAX_EXTRA_SECONDS = 86_400


def start_delay(state: State, executor_id: str) -> float:
    """Return the sim-clock seconds a pod on this executor takes from PENDING to RUNNING (caller holds the lock)."""
    slow = state.slow_executors.get(executor_id)
    return float(state.config["start_seconds"]) + (slow["extra_seconds"] if slow else 0.0)


def deployment_estimate(state: State, request: Request) -> Response:
    """Estimate how long a pod of `template_id` takes to start on `executor_id`."""
    pre_faults(state, "estimate")
    cred = state.authenticate(request.headers)
    state.require_scope(cred, "read")
    before_commit_faults(state, "estimate")
    executor_id = request.args.get("executor_id", "")
    template_id = request.args.get("template_id", "")
    if not executor_id:
        raise field_error("executor_id", "is required")
    if not template_id:
        raise field_error("template_id", "is required")
    template = state.template_by_id(template_id)
    if template is None:
        raise ApiError(404, "template_not_found", f"Template {template_id} not found")
    with state.lock:
        if executor_id not in state.nodes:
            raise ApiError(404, "executor_not_found", f"Executor {executor_id} not found")
        slow = state.slow_executors.get(executor_id)
        seconds = start_delay(state, executor_id)
    return json_response(
        {
            "estimated_seconds": math.ceil(seconds),
            "is_slow_machine": slow is not None,
            "warning_message": slow["warning_message"] if slow else None,
            "is_cached_template": template["category"] == "cluster",
            "docker_image_size": IMAGE_BYTES.get(template["category"]),
        }
    )


def slow_executors(state: State, request: Request) -> Response:
    """Show (GET), mark (POST) or clear (DELETE) slow executors.

    POST `{"executor_ids": [...], "extra_seconds": 60, "warning_message": "..."}` marks each given executor slow:
    its pods start `extra_seconds` later than `start_seconds`, and its estimate says so with the warning.
    """
    if request.method == "POST":
        marks = _slow_marks(json_object(request))
        with state.lock:
            unknown = [executor_id for executor_id in marks if executor_id not in state.nodes]
            if unknown:
                raise ApiError(422, "validation_error", f"unknown executor ids: {unknown[:5]}")
            state.slow_executors.update(marks)
    elif request.method == "DELETE":
        with state.lock:
            state.slow_executors.clear()
    with state.lock:
        return json_response(dict(sorted(state.slow_executors.items())))


def _slow_marks(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Read a POST body into {executor id: mark}; refuse anything malformed with a 422 saying what."""
    unknown_keys = set(body) - {"executor_ids", "extra_seconds", "warning_message"}
    if unknown_keys:
        raise ApiError(422, "validation_error", f"unknown fields: {sorted(unknown_keys)}")
    ids = body.get("executor_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise field_error("executor_ids", "must be a non-empty list of executor ids")
    extra = body.get("extra_seconds", 60)
    if not isinstance(extra, int | float) or isinstance(extra, bool) or not 0 <= extra <= MAX_EXTRA_SECONDS:
        raise field_error("extra_seconds", f"must be a number of seconds from 0 to {MAX_EXTRA_SECONDS}")
    warning = body.get("warning_message", DEFAULT_WARNING)
    if not isinstance(warning, str) or not 1 <= len(warning) <= 500:
        raise field_error("warning_message", "must be 1-500 characters")
    return {executor_id: {"extra_seconds": float(extra), "warning_message": warning} for executor_id in ids}
