"""Pod repair (docs/upstream-api.md §17 "Pod repair and logs"): reboot and reset-gpu, and their lifecycle.

Both act on a RUNNING pod the caller may manage (the same rule as schedule-removal), on the sim clock.
A reboot turns the pod REBOOT_PENDING for ``start_seconds``, then (`State.refresh`) RUNNING, or REBOOT_FAILED when
a ``reboot_failure`` rule fired. A GPU reset runs for RESET_GPU_SECONDS and then reads done (or failed for
every asked GPU when a ``reset_gpu_failure`` rule fired); one reset per pod per minute, else 429.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from .errors import ApiError, field_error, rate_limited
from .httpkit import after_commit_faults, before_commit_faults, json_body, json_object, json_response, pre_faults
from .seed import stable_uuid
from .state import State

RESET_GPU_SECONDS = 5.0
RESET_GPU_INTERVAL = 60.0  # upstream allows one reset a minute


def _managed_running_pod(state: State, request: Request, pod_id: str) -> dict[str, Any]:
    """Return the caller's RUNNING pod it may manage, else 401/403/404/409 (caller holds the lock)."""
    cred = state.authenticate(request.headers)
    state.refresh()
    pod = state.pod_for(cred, pod_id)
    if not state.may_manage(cred, pod):
        raise ApiError(403, "api_key_scope", f"API key '{cred['name']}' does not have the 'manage' scope")
    if pod["status"] != "RUNNING":
        raise ApiError(409, "pod_not_running", f"Pod {pod_id} is {pod['status']}, not RUNNING")
    return pod


def reboot(state: State, request: Request, pod_id: str) -> Response:
    """Start a reboot: REBOOT_PENDING now, RUNNING (or REBOOT_FAILED) after start_seconds."""
    pre_faults(state, "reboot")
    body = json_object(request)
    volume_id = body.get("volume_id")
    if volume_id is not None and not isinstance(volume_id, str):
        raise field_error("volume_id", "must be a string or absent")
    before_commit_faults(state, "reboot")
    with state.lock:
        pod = _managed_running_pod(state, request, pod_id)
        now = state.clock.now()
        failure = state.faults.take("reboot_failure", "reboot")
        pod.update(status="REBOOT_PENDING", updated_at=now, reboot_until=now + state.config["start_seconds"])
        pod["reboot_fails"] = failure.get("message", "Reboot failed: the node did not come back") if failure else None
        state.add_event(pod, "rebooting", "Pod reboot started", now)
        state.refresh()
    after_commit_faults(state, "reboot")
    return json_response({"pod_id": pod_id, "status": "REBOOT_PENDING"})


def _gpu_indices(body: Any, gpu_count: int) -> list[int]:
    """Return the GPUs to reset: every one for null, else the listed indices (each checked)."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_json", "Body must be a JSON object")
    indices = body.get("gpu_indices")
    if indices is None:
        return list(range(gpu_count))
    ints = isinstance(indices, list) and indices and all(type(i) is int for i in indices)  # bool is not an index
    if not ints or not all(0 <= i < gpu_count for i in indices):
        raise field_error("gpu_indices", f"must be null or a non-empty list of GPU indices from 0 to {gpu_count - 1}")
    return sorted(set(indices))


def reset_gpu(state: State, request: Request, pod_id: str) -> Response:
    """Start a GPU reset: 202 {request_id, status: running}; 429 at more than one a minute per pod."""
    pre_faults(state, "reset-gpu")
    body = json_body(request)
    before_commit_faults(state, "reset-gpu")
    with state.lock:
        pod = _managed_running_pod(state, request, pod_id)
        indices = _gpu_indices(body, pod["gpu_count"])
        now = state.clock.now()
        last = max((r["started_at"] for r in pod.setdefault("gpu_resets", {}).values()), default=None)
        if last is not None and now - last < RESET_GPU_INTERVAL:
            retry = max(1, math.ceil(last + RESET_GPU_INTERVAL - now))
            raise rate_limited("GPU reset is limited to one per minute", retry)
        failure = state.faults.take("reset_gpu_failure", "reset-gpu")
        request_id = str(uuid.uuid4())
        pod["gpu_resets"][request_id] = {"started_at": now, "indices": indices, "fails": bool(failure)}
    after_commit_faults(state, "reset-gpu")
    return json_response({"request_id": request_id, "status": "running"}, 202)


def reset_gpu_status(state: State, request: Request, pod_id: str, request_id: str) -> Response:
    """Read a GPU reset: running until RESET_GPU_SECONDS have passed, then done or failed."""
    pre_faults(state, "reset-gpu")
    cred = state.authenticate(request.headers)
    with state.lock:
        state.refresh()
        pod = state.pod_for(cred, pod_id)
        reset = pod.get("gpu_resets", {}).get(request_id)
        if reset is None:
            raise ApiError(404, "reset_not_found", f"GPU reset {request_id} not found on pod {pod_id}")
        if state.clock.now() < reset["started_at"] + RESET_GPU_SECONDS:
            return json_response({"request_id": request_id, "status": "running"})
        fails = reset["fails"]
        gpus = [
            {
                "index": i,
                "uuid": "GPU-" + stable_uuid("gpu", pod["node_id"], i),
                "result": "failed" if fails else "reset",
                "detail": "GPU did not come back after the reset" if fails else "GPU reset",
            }
            for i in reset["indices"]
        ]
        error = {"code": "gpu_reset_failed", "message": "A GPU failed to reset"} if fails else None
        return json_response(
            {
                "request_id": request_id,
                "status": "failed" if fails else "done",
                "ok": not fails,
                "container_restarted": False,
                "gpus": gpus,
                "error": error,
            }
        )
