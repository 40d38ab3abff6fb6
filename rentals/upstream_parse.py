"""Turn the Lium API's JSON answers into typed values, checking every length and shape on the way in.

Pure functions over already-decoded JSON: no HTTP here (`rentals.upstream` calls these). What cannot be
read raises `Unparseable`; the client turns that into an inconclusive rent or a `MalformedAnswer` error, so a
broken answer never reads as a confirmation or as proof that something is absent.

Identifiers (pod, cluster, executor, request ids, error codes) must fit the column they are stored in: one
that does not is refused or dropped, never cut into a different id. Free text (messages, hints) is cut to
`TEXT_MAX`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt

# The columns these values go into (a too-long value is a DataError on PostgreSQL: the write would be lost).
POD_ID_MAX = ClusterMember._meta.get_field("pod_id").max_length or 100
CLUSTER_ID_MAX = Rental._meta.get_field("cluster_id").max_length or 200
EXECUTOR_ID_MAX = min(
    ClusterMember._meta.get_field("executor_id").max_length or 100,
    RentalNode._meta.get_field("executor_id").max_length or 100,
)
REQUEST_ID_MAX = min(
    RentAttempt._meta.get_field("request_id").max_length or 100,
    Rental._meta.get_field("error_request_id").max_length or 100,
)
CODE_MAX = min(
    RentAttempt._meta.get_field("error_code").max_length or 100, Rental._meta.get_field("error_code").max_length or 100
)
POD_STATUS_MAX = ClusterMember._meta.get_field("status").max_length or 32
PHASE_MAX = ClusterMember._meta.get_field("phase").max_length or 64
SSH_COMMAND_MAX = ClusterMember._meta.get_field("ssh_command").max_length or 300
POD_NAME_MAX = Rental._meta.get_field("pod_name").max_length or 64
FABRIC_ID_MAX = Rental._meta.get_field("fabric_id").max_length or 300
TEXT_MAX = 2000  # messages and hints (TextField): cut, never refused
SHORT_TEXT_MAX = 200  # names and labels shown on pages
# DecimalField(max_digits=12, decimal_places=4): at most 8 digits before the point.
PRICE_MAX = Decimal("99999999.9999")
COUNT_MAX = 2**31 - 1  # PositiveIntegerField


class Unparseable(ValueError):
    """An answer (or a required part of it) does not have the documented shape."""


# --- Scalars ---------------------------------------------------------------------------------------------


def text(value: Any, limit: int = TEXT_MAX) -> str:
    """Return free text cut to `limit` characters ("" for null or a non-scalar)."""
    if value is None or isinstance(value, dict | list):
        return ""
    return str(value)[:limit]


def ident(value: Any, limit: int) -> str | None:
    """Return `value` when it is a non-empty printable string of at most `limit` characters, else None."""
    if not isinstance(value, str) or not value or len(value) > limit or not value.isprintable():
        return None
    return value


def code(value: Any) -> str:
    """Return an error code that fits its column, or "" (a longer one is not a code we know)."""
    return ident(value, CODE_MAX) or ""


def request_id(value: Any) -> str:
    """Return a request id that fits its column, or "" (dropped rather than cut into another id)."""
    return ident(value, REQUEST_ID_MAX) or ""


def count(value: Any, maximum: int = COUNT_MAX) -> int | None:
    """Return a whole number 0..maximum (ints or digit strings, as the API sends gpu_count), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 0 <= value <= maximum:
        return value
    return None


def price(value: Any) -> Decimal | None:
    """Return a price that fits DecimalField(12, 4), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0 or amount > PRICE_MAX:
        return None
    return amount.quantize(Decimal("0.0001"))


def money(value: Any) -> Decimal | None:
    """Return a finite amount (may be negative, e.g. a balance), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None


def timestamp(value: Any) -> datetime | None:
    """Return an ISO-8601 time with its zone, or None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def ipv4(value: Any) -> str:
    """Return a valid IPv4 address in its canonical form, or ""."""
    if not isinstance(value, str) or len(value) > 15:
        return ""
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        return ""


# `ssh <user>@<host> -p <port>`, `-p` optional (upstream-api.md §8). User and host: safe characters only, so
# the line can be copied into a shell as it is.
_SSH_USER = r"[A-Za-z_][A-Za-z0-9_.-]{0,31}"
_SSH_HOST = r"[A-Za-z0-9][A-Za-z0-9.:-]{0,252}"  # a name, IPv4 or IPv6; never a leading "-" (an option)
_SSH_COMMAND = re.compile(rf"ssh ({_SSH_USER})@({_SSH_HOST})(?: -p ([0-9]{{1,5}}))?")


def ssh_command(value: Any) -> str:
    """Return the pod's SSH line when it has exactly the documented form and a port 1-65535, else ""."""
    if not isinstance(value, str) or len(value) > SSH_COMMAND_MAX:
        return ""
    match = _SSH_COMMAND.fullmatch(value)
    if match is None:
        return ""
    port = match.group(3)
    if port is not None and not 1 <= int(port) <= 65535:
        return ""
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Unparseable(f"{what} is not a JSON object.")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise Unparseable(f"{what} is not a JSON list.")
    return value


# --- Errors --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorDetail:
    code: str
    message: str
    hint: str
    request_id: str
    data: Any


def error_detail(body: Any, *, header_request_id: str, fallback: str) -> ErrorDetail:
    """Read the error envelope (current and older servers) into code, human message, hint, request id."""
    error_code = hint = rid = message = ""
    data: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            error_code = code(error.get("code"))
            hint = text(error.get("hint") or "")
            rid = request_id(error.get("request_id"))
            data = error.get("data")
            message = text(error.get("message") or "")
        elif isinstance(error, str):
            message = error
        detail = body.get("detail", body.get("message"))
        validation = body.get("validation_errors")
        if isinstance(validation, list) and validation:
            message = "; ".join(
                f"{item.get('field')}: {item.get('message')}" if isinstance(item, dict) else str(item)
                for item in validation[:20]
            )
        elif isinstance(detail, list) and detail:
            message = "; ".join(
                str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in detail[:20]
            )
        elif isinstance(detail, dict):
            message = text(detail.get("message") or message)
            data = data if data is not None else detail
        elif isinstance(detail, str) and detail:
            message = message or detail
    return ErrorDetail(
        code=error_code,
        message=text(message or fallback),
        hint=text(hint),
        request_id=rid or request_id(header_request_id),
        data=data,
    )


# --- Rent ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RentBody:
    """A 2xx rent answer: `success` (None when absent), member pod ids, a cluster id when given."""

    success: bool | None
    message: str
    pod_ids: list[str]
    cluster_id: str


def rent_body(body: Any) -> RentBody:
    """Read a 2xx rent answer; raise Unparseable for anything that is not the documented object."""
    body = _object(body, "The rent answer")
    success = body.get("success")
    if success is not None and not isinstance(success, bool):
        raise Unparseable("The rent answer's `success` is not true or false.")
    raw_pods = body.get("pod_ids")
    pod_ids: list[str] = []
    if raw_pods is not None:
        for pod_id in _list(raw_pods, "The rent answer's `pod_ids`"):
            checked = ident(pod_id, POD_ID_MAX)
            if checked is None:
                raise Unparseable("The rent answer lists a pod id that is not a short string.")
            pod_ids.append(checked)
    raw_cluster = body.get("cluster_id")
    cluster_id = ""
    if raw_cluster is not None:
        checked = ident(raw_cluster, CLUSTER_ID_MAX)
        if checked is None:
            raise Unparseable("The rent answer's `cluster_id` is not a short string.")
        cluster_id = checked
    return RentBody(success=success, message=text(body.get("message") or ""), pod_ids=pod_ids, cluster_id=cluster_id)


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
    removal_scheduled_at: datetime | None = None
    jupyter_url: str = ""
    ports_mapping: tuple[tuple[str, int], ...] = ()


def pod_row(row: Any) -> PodRow:
    """Read one pod row; raise Unparseable when it is not an object or its id, status or cluster id is bad."""
    row = _object(row, "A pod row")
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
    jupyter = row.get("jupyter_url")
    ports = row.get("ports_mapping")
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
        removal_scheduled_at=timestamp(row.get("removal_scheduled_at")),
        jupyter_url=jupyter if isinstance(jupyter, str) and re.fullmatch(r"https?://\S{1,500}", jupyter) else "",
        ports_mapping=tuple(
            (str(inner), outer)
            for inner, outer in (ports.items() if isinstance(ports, dict) else ())
            if count(inner, 65535) is not None and isinstance(outer, int) and 0 < outer <= 65535
        ),
    )


def pod_listing(body: Any) -> list[PodRow]:
    """Read `GET /pods`: a list of pod rows; any row that cannot be read makes the whole listing unreadable."""
    return [pod_row(row) for row in _list(body, "The pod listing")]


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
    body = _object(body, "The delete answer")
    raw_rows = _list(body.get("pods"), "The delete answer's `pods`")
    if not raw_rows:
        raise Unparseable("The delete answer has no member rows.")
    rows = []
    for raw in raw_rows:
        raw = _object(raw, "A delete row")
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


# --- Version and account -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Features:
    """The optional features `GET /version` lists (e.g. `rent_idempotency`)."""

    names: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return name in self.names


def features(body: Any) -> Features:
    """Read `GET /version`: an object whose `features` is a list of strings (absent: none)."""
    body = _object(body, "The version answer")
    raw = body.get("features")
    if raw is None:
        return Features()
    names = _list(raw, "The version answer's `features`")
    if not all(isinstance(name, str) for name in names):
        raise Unparseable("The version answer's `features` holds something other than names.")
    return Features(frozenset(name[:SHORT_TEXT_MAX] for name in names))


@dataclass(frozen=True)
class Account:
    """`GET /users/me`, as far as the dashboard reads it: who, and the USD balance (None when not given)."""

    id: str
    email: str
    balance: Decimal | None


def account(body: Any) -> Account:
    body = _object(body, "The account answer")
    raw_id = body.get("id")
    return Account(
        id=text(raw_id, SHORT_TEXT_MAX) if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else "",
        email=ident(body.get("email"), SHORT_TEXT_MAX) or "",
        balance=money(body.get("balance")),
    )


# --- Offers and templates ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One free node (a whole executor) of a fabric."""

    id: str
    machine_name: str
    gpu_count: int
    price_per_gpu: Decimal
    location: str
    country_code: str
    reliability_score: float | None
    max_cuda_version: str
    nvlink: bool
    gpu_power_limited: bool
    last_verified_at: str
    ip: str
    available_gpu_count: int | None = None

    @property
    def price_per_hour(self) -> Decimal:
        return self.price_per_gpu * self.gpu_count

    @property
    def whole(self) -> bool:
        """Whether every GPU of the host is free: a cluster rents whole nodes only."""
        return self.available_gpu_count is None or self.available_gpu_count >= self.gpu_count


@dataclass(frozen=True)
class Fabric:
    """A fabric offer: free nodes on one RDMA fabric."""

    fabric_id: str
    fabric_type: str
    link_rate: str
    measured: bool
    node_count: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def free_count(self) -> int:
        return len(self.nodes)

    @property
    def gpu_type(self) -> str:
        return self.nodes[0].machine_name if self.nodes else ""

    @property
    def gpus_per_node(self) -> int:
        return self.nodes[0].gpu_count if self.nodes else 0

    @property
    def cheapest_node_hour(self) -> Decimal | None:
        return min((node.price_per_hour for node in self.nodes), default=None)

    def cheapest(self, count: int) -> list[Node]:
        """Return the `count` cheapest nodes, by price then id (as the official CLI picks them)."""
        whole = [node for node in self.nodes if node.whole]
        return sorted(whole, key=lambda node: (node.price_per_hour, node.id))[:count]


def parse_node(row: dict[str, Any]) -> Node | None:
    """Read one node; None when its id could not be stored (it then cannot be offered)."""
    node_id = ident(row.get("id"), EXECUTOR_ID_MAX)
    if node_id is None:
        return None
    location = row.get("location")
    if not isinstance(location, dict):
        location = {}
    score = row.get("reliability_score")
    where = ", ".join(text(part, 100) for part in (location.get("city"), location.get("country")) if part)
    return Node(
        id=node_id,
        machine_name=text(row.get("machine_name") or "", 100),
        gpu_count=count(row.get("gpu_count"), 1024) or 0,
        price_per_gpu=price(row.get("price_per_gpu")) or Decimal(0),
        location=where,
        country_code=text(location.get("country_code") or "", 8),
        reliability_score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        max_cuda_version=text(row.get("max_cuda_version") or "", 32),
        nvlink=row.get("nvlink") is True,
        gpu_power_limited=row.get("gpu_power_limited") is True,
        last_verified_at=text(row.get("last_verified_at") or "", 64),
        ip=ipv4(row.get("executor_ip_address")),
        available_gpu_count=count(row.get("available_gpu_count"), 1024),
    )


def parse_offer(row: dict[str, Any]) -> Fabric | None:
    """Read one fabric offer; None when its id could not be stored."""
    fabric_id = ident(row.get("fabric_id"), FABRIC_ID_MAX)
    if fabric_id is None:
        return None
    raw_nodes = row.get("nodes")
    parsed = (parse_node(raw) for raw in (raw_nodes if isinstance(raw_nodes, list) else []) if isinstance(raw, dict))
    nodes = [node for node in parsed if node is not None]
    fabric_type = row.get("fabric_type")
    return Fabric(
        fabric_id=fabric_id,
        fabric_type=fabric_type if fabric_type in ("infiniband", "roce") else "infiniband",
        link_rate=text(row.get("link_rate") or "", 100),
        measured=row.get("fabric_measured") is True,
        node_count=count(row.get("node_count")) or len(nodes),
        nodes=nodes,
    )


def offer_listing(body: Any) -> list[Fabric]:
    """Read `GET /executors/infiniband-clusters`; rows that cannot be offered are left out."""
    rows = _list(body, "The offer listing")
    return [fabric for fabric in (parse_offer(row) for row in rows if isinstance(row, dict)) if fabric is not None]


@dataclass(frozen=True)
class TemplateRow:
    id: str
    name: str
    docker_image: str
    docker_image_tag: str


def template_listing(body: Any) -> list[TemplateRow]:
    """Read `GET /templates`; a row without a usable id or image is left out."""
    templates = []
    for row in _list(body, "The template listing"):
        if not isinstance(row, dict):
            continue
        template_id = ident(row.get("id"), 100)
        image = ident(row.get("docker_image"), SHORT_TEXT_MAX)
        if template_id is None or image is None:
            continue
        templates.append(
            TemplateRow(
                id=template_id,
                name=text(row.get("name") or "", SHORT_TEXT_MAX),
                docker_image=image,
                docker_image_tag=ident(row.get("docker_image_tag"), 100) or "latest",
            )
        )
    return templates
