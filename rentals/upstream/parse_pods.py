"""Turn the Lium API's pod listing and delete answers into typed values (`PodRow`, `DeleteResult`).

Checked like every answer (`rentals.upstream.parse`): an id that does not fit its column is refused or
dropped, never cut; what cannot be read raises `Unparseable`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import ijson

from rentals.upstream.parse import (
    CLUSTER_ID_MAX,
    EXECUTOR_ID_MAX,
    PHASE_MAX,
    POD_ID_MAX,
    POD_NAME_MAX,
    POD_STATUS_MAX,
    SHORT_TEXT_MAX,
    Unparseable,
    count,
    ident,
    ipv4,
    json_list,
    json_object,
    price,
    ssh_command,
    text,
    timestamp,
)

# --- Pods ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodRow:
    """One `GET /pods` row, every field checked (a malformed optional field reads as absent)."""

    id: str
    status: str
    pod_name: str = ""
    cluster_id: str | None = None
    cluster_node_index: int | None = None
    overlay_ip: str = ""
    ssh_connect_cmd: str = ""
    executor_id: str = ""
    phase: str = ""
    eta_seconds: int | None = None
    price: Decimal | None = None
    gpu_count: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    removal_scheduled_at: datetime | None = None
    jupyter_url: str = ""
    ports_mapping: tuple[tuple[int, int], ...] = ()  # (container port, host port)


def pod_row(row: Any) -> PodRow:
    """Read one pod row; raise Unparseable when it is not an object or its id, status or cluster id is bad."""
    row = json_object(row, "A pod row")
    pod_id = ident(row.get("id"), POD_ID_MAX)
    if pod_id is None:
        raise Unparseable("A pod row has no usable `id`.")
    status = ident(row.get("status"), POD_STATUS_MAX)
    if status is None:
        raise Unparseable(f"Pod {pod_id} has no usable `status`.")
    cluster_id: str | None = None
    if row.get("cluster_id") is not None:
        cluster_id = ident(row.get("cluster_id"), CLUSTER_ID_MAX)
        if cluster_id is None:
            raise Unparseable(f"Pod {pod_id} has a `cluster_id` that is not a short string.")
    executor = row.get("executor")
    executor_id = ident(executor.get("id"), EXECUTOR_ID_MAX) if isinstance(executor, dict) else None
    return PodRow(
        id=pod_id,
        status=status,
        pod_name=ident(row.get("pod_name"), POD_NAME_MAX) or "",
        cluster_id=cluster_id,
        cluster_node_index=count(row.get("cluster_node_index"), 100_000),
        overlay_ip=ipv4(row.get("cluster_overlay_ip")),
        ssh_connect_cmd=ssh_command(row.get("ssh_connect_cmd")),
        executor_id=executor_id or "",
        phase=text(ident(row.get("phase"), PHASE_MAX) or ""),
        eta_seconds=count(row.get("estimated_ready_seconds")),
        price=price(row.get("price")),
        gpu_count=count(row.get("gpu_count"), 1024),
        created_at=timestamp(row.get("created_at")),
        updated_at=timestamp(row.get("updated_at")),
        removal_scheduled_at=timestamp(row.get("removal_scheduled_at")),
        jupyter_url=web_url(row.get("jupyter_url")),
        ports_mapping=port_pairs(row.get("ports_mapping")),
    )


JUPYTER_URL_MAX = 500  # ClusterMember.jupyter_url


def web_url(value: Any) -> str:
    """Return an absolute http(s) URL with a host and no whitespace or control character, else ""."""
    if not isinstance(value, str) or not 0 < len(value) <= JUPYTER_URL_MAX or not value.isprintable():
        return ""
    if any(character.isspace() for character in value):
        return ""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number 0-65535)
    except ValueError:
        return ""
    return value if parts.scheme in ("http", "https") and parts.hostname else ""


def port_pairs(value: Any) -> tuple[tuple[int, int], ...]:
    """Return `{"container port": host port}` as (container, host) pairs of ports 1-65535, in container order."""
    if not isinstance(value, dict):
        return ()
    pairs = []
    for inner, outer in value.items():
        container = count(inner, 65535)
        host = count(outer, 65535) if not isinstance(outer, str) else None
        if container and host:
            pairs.append((container, host))
    return tuple(sorted(pairs))


def pod_listing(body: Any) -> list[PodRow]:
    """Read `GET /pods`: a list of pod rows; any row that cannot be read makes the whole listing unreadable."""
    return [pod_row(row) for row in json_list(body, "The pod listing")]


class TooManyRows(Unparseable):
    """A listing past the rows (or bytes) the dashboard reads."""


class _ChunkReader:
    """A file-like `read(n)` over an iterator of byte chunks, so ijson's C parser pulls the body as it arrives."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = iter(chunks)
        self.pending = b""
        self.started = False

    def read(self, size: int = -1) -> bytes:
        while not self.pending:
            chunk = next(self.chunks, None)
            if chunk is None:
                return b""
            if not self.started and chunk.strip():
                # Only a list has elements named "item": an object or a scalar would read as an empty listing.
                if not chunk.lstrip().startswith(b"["):
                    raise Unparseable("The pod listing is not a JSON list.")
                self.started = True
            self.pending = chunk
        if size is None or size < 0:
            size = len(self.pending)
        out, self.pending = self.pending[:size], self.pending[size:]
        return out


def pod_listing_stream(chunks: Iterable[bytes], *, max_pods: int) -> list[PodRow]:
    """Read `GET /pods` as its bytes arrive: the same rules as `pod_listing`, holding one raw row at a time.

    Raise TooManyRows past `max_pods` rows, Unparseable for a body that is not a JSON list of readable rows.
    """
    rows: list[PodRow] = []
    reader = _ChunkReader(chunks)
    try:
        for raw in ijson.items(reader, "item", use_float=True):  # each element of the top-level list
            if len(rows) >= max_pods:
                raise TooManyRows(f"it has more than {max_pods} pods (POD_LISTING_MAX_PODS).")
            rows.append(pod_row(raw))
    except ijson.JSONError as exc:
        raise Unparseable("The pod listing is not JSON.") from exc
    if not reader.started:
        raise Unparseable("The pod listing is not a JSON list.")
    return rows


# --- Events --------------------------------------------------------------------------------------------------

EVENT_TYPE_MAX = 64


@dataclass(frozen=True)
class PodEvent:
    """One `GET /pods/{id}/events` row: what happened to the pod, when."""

    event_type: str
    message: str
    created_at: datetime | None = None

    def as_dict(self) -> dict[str, str | None]:
        """Return the event as stored on the member (JSON)."""
        return {
            "event_type": self.event_type,
            "message": self.message,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


def pod_event_listing(body: Any) -> list[PodEvent]:
    """Read a pod's events, oldest first; a row without a usable `event_type` is skipped, not guessed."""
    events = []
    for raw in json_list(body, "The pod's events"):
        raw = json_object(raw, "A pod event")
        event_type = ident(raw.get("event_type"), EVENT_TYPE_MAX)
        if event_type is None:
            continue
        events.append(
            PodEvent(
                event_type=event_type,
                message=text(raw.get("message") or "", SHORT_TEXT_MAX * 5),
                created_at=timestamp(raw.get("created_at")),
            )
        )
    return sorted(events, key=lambda event: (event.created_at is None, event.created_at or datetime.min))


# --- Delete --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteRow:
    pod_id: str
    success: bool
    message: str
    pod_name: str = ""
    cluster_node_index: int | None = None


@dataclass(frozen=True)
class DeleteResult:
    """The 200 of `DELETE /clusters/{id}`: one row per member (never empty, upstream-api.md §10)."""

    cluster_id: str
    success: bool
    message: str
    rows: tuple[DeleteRow, ...]


def delete_result(body: Any) -> DeleteResult:
    """Read the delete answer; a body without member rows is unreadable, never a removal."""
    body = json_object(body, "The delete answer")
    raw_rows = json_list(body.get("pods"), "The delete answer's `pods`")
    if not raw_rows:
        raise Unparseable("The delete answer has no member rows.")
    rows = []
    for raw in raw_rows:
        raw = json_object(raw, "A delete row")
        pod_id = ident(raw.get("pod_id"), POD_ID_MAX)
        if pod_id is None or not isinstance(raw.get("success"), bool):
            raise Unparseable("A delete row has no usable `pod_id` or `success`.")
        rows.append(
            DeleteRow(
                pod_id=pod_id,
                success=raw["success"],
                message=text(raw.get("message") or "", SHORT_TEXT_MAX),
                pod_name=ident(raw.get("pod_name"), POD_NAME_MAX) or "",
                cluster_node_index=count(raw.get("cluster_node_index"), 100_000),
            )
        )
    success = body.get("success")
    return DeleteResult(
        cluster_id=ident(body.get("cluster_id"), CLUSTER_ID_MAX) or "",
        # A missing overall flag: every row says.
        success=success if isinstance(success, bool) else all(row.success for row in rows),
        message=text(body.get("message") or ""),
        rows=tuple(rows),
    )
