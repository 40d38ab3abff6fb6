"""Turn the pod repair answers into typed values (upstream-api.md §17 "Pod repair and logs").

`POST /pods/{id}/reset-gpu` answers 202 `{request_id, status: "running"}`; `GET /pods/{id}/reset-gpu/{request_id}`
answers the same while it runs, then `status` done|failed|timeout with `ok`, `container_restarted`, `gpus` (one row
per GPU: index, uuid, result reset|latch_cleared|failed, detail) and `error` ({code, message} or null). Strict like
every answer: a field of the wrong type makes the whole answer `Unparseable`, never a guess. The reboot's answer
is not read (the official client does not read it either): the pod listing follows the member.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rentals.upstream.parse import Unparseable, code, ident, json_list, json_object, text

RESET_STATUSES = frozenset({"running", "done", "failed", "timeout"})
RESET_FINAL = frozenset({"done", "failed", "timeout"})
GPU_RESULTS = frozenset({"reset", "latch_cleared", "failed"})
GPUS_MAX = 64  # a node has at most 16 GPUs today; more rows than this is not a node's answer
REQUEST_ID_MAX = 100
DETAIL_MAX = 300


@dataclass(frozen=True)
class GpuResult:
    index: int
    uuid: str
    result: str  # reset | latch_cleared | failed
    detail: str


@dataclass(frozen=True)
class ResetStatus:
    """A GPU reset as Lium reports it; `final` once its status is done, failed or timeout."""

    request_id: str
    status: str
    ok: bool | None = None
    container_restarted: bool | None = None
    gpus: tuple[GpuResult, ...] = ()
    error_code: str = ""
    error_message: str = ""

    @property
    def final(self) -> bool:
        return self.status in RESET_FINAL


def _flag(body: dict[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise Unparseable(f"The reset's `{name}` is not true, false or null.")
    return value


def _gpu(row: Any) -> GpuResult:
    row = json_object(row, "A GPU row of the reset")
    index = row.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < GPUS_MAX:
        raise Unparseable("A GPU row's `index` is not a GPU index.")
    result = row.get("result")
    if result not in GPU_RESULTS:
        raise Unparseable(f"A GPU row's `result` is not one of {', '.join(sorted(GPU_RESULTS))}.")
    uuid, detail = row.get("uuid"), row.get("detail")
    if not all(value is None or isinstance(value, str) for value in (uuid, detail)):
        raise Unparseable("A GPU row's `uuid` or `detail` is not text.")
    return GpuResult(index=index, uuid=text(uuid, 100), result=str(result), detail=text(detail, DETAIL_MAX))


def _error(value: Any) -> tuple[str, str]:
    if value is None:
        return "", ""
    error = json_object(value, "The reset's `error`")
    return code(error.get("code")), text(error.get("message"), DETAIL_MAX)


def reset_status(body: Any) -> ResetStatus:
    """Read a reset-gpu answer (the 202 that starts it, or a status read); raise Unparseable for another shape."""
    body = json_object(body, "The GPU reset answer")
    request_id = ident(body.get("request_id"), REQUEST_ID_MAX)
    if request_id is None:
        raise Unparseable("The GPU reset answer has no usable `request_id`.")
    status = body.get("status")
    if status not in RESET_STATUSES:
        raise Unparseable(f"The GPU reset's `status` is not one of {', '.join(sorted(RESET_STATUSES))}.")
    gpus = body.get("gpus")
    rows = json_list(gpus, "The reset's `gpus`") if gpus is not None else []
    if len(rows) > GPUS_MAX:
        raise Unparseable(f"The reset lists more than {GPUS_MAX} GPUs.")
    error_code, error_message = _error(body.get("error"))
    return ResetStatus(
        request_id=request_id,
        status=str(status),
        ok=_flag(body, "ok"),
        container_restarted=_flag(body, "container_restarted"),
        gpus=tuple(_gpu(row) for row in rows),
        error_code=error_code,
        error_message=error_message,
    )


def reset_conflict(data: Any, request_id: str) -> ResetStatus | None:
    """Read a 409 whose error data lists `gpus` (the official client's "a GPU failed") as a failed reset."""
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        return None
    try:
        rows = tuple(_gpu(row) for row in data["gpus"][:GPUS_MAX])
    except Unparseable:
        return None
    return ResetStatus(request_id=request_id, status="failed", ok=False, gpus=rows)
