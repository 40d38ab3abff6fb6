"""Turn the Lium API's JSON answers into typed values, checking every length and shape on the way in.

Here: the column limits, the field readers, errors, rent answers, version and account. Pods and deletes are
read in `rentals.upstream.parse_pods`, offers and templates in `rentals.upstream.parse_offers`.

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
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model

from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt


def column_length(model: type[Model], name: str) -> int:
    """Return the max_length of a column these values go into (each declares one; none fails at import)."""
    length = getattr(model._meta.get_field(name), "max_length", None)
    if not isinstance(length, int):
        raise ImproperlyConfigured(f"{model.__name__}.{name} declares no max_length for the parser to check.")
    return length


# The columns these values go into (a too-long value is a DataError on PostgreSQL: the write would be lost).
POD_ID_MAX = column_length(ClusterMember, "pod_id")
CLUSTER_ID_MAX = column_length(Rental, "cluster_id")
EXECUTOR_ID_MAX = min(column_length(ClusterMember, "executor_id"), column_length(RentalNode, "executor_id"))
REQUEST_ID_MAX = min(column_length(RentAttempt, "request_id"), column_length(Rental, "error_request_id"))
CODE_MAX = min(column_length(RentAttempt, "error_code"), column_length(Rental, "error_code"))
POD_STATUS_MAX = column_length(ClusterMember, "status")
PHASE_MAX = column_length(ClusterMember, "phase")
SSH_COMMAND_MAX = column_length(ClusterMember, "ssh_command")
POD_NAME_MAX = column_length(Rental, "pod_name")
FABRIC_ID_MAX = column_length(Rental, "fabric_id")
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
    amount = money(value)
    if amount is None or amount < 0 or amount > PRICE_MAX:
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


def ssh_parts(value: Any) -> tuple[str, str, int] | None:
    """Return (user, host, port) of a checked SSH line (port 22 when none is given), else None."""
    if not ssh_command(value):
        return None
    match = _SSH_COMMAND.fullmatch(value)
    assert match is not None
    return match.group(1), match.group(2), int(match.group(3) or 22)


def json_object(value: Any, what: str) -> dict[str, Any]:
    """Return the value if it is a JSON object, else raise `Unparseable` naming `what`."""
    if not isinstance(value, dict):
        raise Unparseable(f"{what} is not a JSON object.")
    return value


def json_list(value: Any, what: str) -> list[Any]:
    """Return the value if it is a JSON list, else raise `Unparseable` naming `what`."""
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
    body = json_object(body, "The rent answer")
    success = body.get("success")
    if success is not None and not isinstance(success, bool):
        raise Unparseable("The rent answer's `success` is not true or false.")
    raw_pods = body.get("pod_ids")
    pod_ids: list[str] = []
    if raw_pods is not None:
        for pod_id in json_list(raw_pods, "The rent answer's `pod_ids`"):
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


# --- Version and account -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Features:
    """The optional features `GET /version` lists (e.g. `rent_idempotency`)."""

    names: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return name in self.names


def features(body: Any) -> Features:
    """Read `GET /version`: an object whose `features` is a list of strings (absent: none)."""
    body = json_object(body, "The version answer")
    raw = body.get("features")
    if raw is None:
        return Features()
    names = json_list(raw, "The version answer's `features`")
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
    body = json_object(body, "The account answer")
    raw_id = body.get("id")
    return Account(
        id=text(raw_id, SHORT_TEXT_MAX) if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else "",
        email=ident(body.get("email"), SHORT_TEXT_MAX) or "",
        balance=money(body.get("balance")),
    )
