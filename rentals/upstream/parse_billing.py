"""Turn `GET /billing/statement` into typed values (`Statement`, `StatementPod`, `LedgerDay`).

What Lium debited, per pod (removed pods too) and per UTC day (docs/upstream-api.md §17). A day may have several
ledger rows; they are added up here, so a reader gets one amount per pod and day. A pod row without a usable id,
or a day that is not `YYYY-MM-DD` with an amount, makes the whole statement unreadable: a partial ledger would
confirm or contradict our cost on evidence that is not there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from rentals.upstream.parse import POD_ID_MAX, SHORT_TEXT_MAX, Unparseable, ident, json_list, json_object, money


@dataclass(frozen=True)
class StatementPod:
    """One pod's debits: its total and its amount per UTC day (several ledger rows of a day summed)."""

    pod_id: str
    pod_name: str
    total: Decimal
    days: dict[date, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class Statement:
    start_day: date
    end_day: date
    total: Decimal
    pods: list[StatementPod]


def day_of(value: Any, what: str) -> date:
    """Read a UTC day `YYYY-MM-DD`; raise Unparseable naming `what`."""
    if isinstance(value, str) and len(value) == 10:
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value)
    raise Unparseable(f"{what} is not a day (YYYY-MM-DD).")


def _amount(value: Any, what: str) -> Decimal:
    amount = money(value)
    if amount is None:
        raise Unparseable(f"{what} is not an amount.")
    return amount


def ledger_days(raw: Any, pod_id: str) -> dict[date, Decimal]:
    """Sum a pod's ledger rows per day (`day`, or `date`, and `amount`, or `total`)."""
    days: dict[date, Decimal] = {}
    for row in json_list(raw if raw is not None else [], f"Pod {pod_id}'s `days`"):
        row = json_object(row, f"A ledger row of pod {pod_id}")
        day = day_of(row.get("day", row.get("date")), f"A ledger row's day of pod {pod_id}")
        amount = _amount(row.get("amount", row.get("total")), f"A ledger row's amount of pod {pod_id}")
        days[day] = days.get(day, Decimal(0)) + amount
    return days


def statement_pod(raw: Any) -> StatementPod:
    row = json_object(raw, "A statement row")
    pod_id = ident(row.get("pod_id"), POD_ID_MAX)
    if pod_id is None:
        raise Unparseable("A statement row has no usable `pod_id`.")
    return StatementPod(
        pod_id=pod_id,
        pod_name=ident(row.get("pod_name"), SHORT_TEXT_MAX) or "",
        total=_amount(row.get("total"), f"The total of pod {pod_id}"),
        days=ledger_days(row.get("days"), pod_id),
    )


def statement(body: Any) -> Statement:
    """Read the statement answer `{start_day, end_day, total, pods}`."""
    body = json_object(body, "The billing statement")
    return Statement(
        start_day=day_of(body.get("start_day"), "The statement's `start_day`"),
        end_day=day_of(body.get("end_day"), "The statement's `end_day`"),
        total=_amount(body.get("total"), "The statement's `total`"),
        pods=[statement_pod(row) for row in json_list(body.get("pods"), "The statement's `pods`")],
    )
