"""`GET /billing/statement` from the simulator's ledger, and its control route `POST /_sim/billing`.

The statement has one row per pod of the caller's account (removed pods too) that was billed within
[start_day, end_day] (UTC, inclusive; both default to today), latest billed first; its `days` are the ledger
rows, oldest first: one per UTC day, plus one per skew row (`POST /_sim/billing {"statement_skew_usd": 1.5,
"day": "YYYY-MM-DD"}` adds that amount to every pod billed that day, so the statement disagrees with what ran).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from .billing import BILLING_STATUSES
from .clock import iso
from .errors import ApiError
from .httpkit import json_body, json_response
from .state import State


def _day(value: Any, name: str, default: str) -> str:
    if value is None or value == "":
        return default
    try:
        if not isinstance(value, str) or len(value) != 10:
            raise ValueError
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise ApiError(422, "validation_error", f"{name} must be a UTC day YYYY-MM-DD") from None


def _row(state: State, entry: dict[str, Any], start: str, end: str) -> dict[str, Any] | None:
    pod = entry["pod"]
    days = []
    for day in sorted(entry["days"]):
        if start <= day <= end:
            charged = entry["days"][day]
            amount = round(charged["amount"], 6)  # each ledger row as debited; the total is their sum
            days.append({"day": day, "billed_seconds": round(charged["billed_seconds"]), "amount": amount})
            if day in state.statement_skews:
                days.append({"day": day, "billed_seconds": 0, "amount": state.statement_skews[day]})
    if not days:
        return None
    running = pod["id"] in state.pods and pod["status"] in BILLING_STATUSES
    return {
        "pod_id": pod["id"],
        "pod_name": pod["pod_name"],
        "gpu_name": pod["executor"].get("machine_name"),
        "gpu_count": pod["gpu_count"],
        "billed_seconds": sum(d["billed_seconds"] for d in days),
        "total": round(sum(d["amount"] for d in days), 6),
        "created_at": iso(pod["created_at"]),
        "removed_at": None if running else iso(pod.get("billed_until") or pod["updated_at"]),
        "api_key_id": pod["api_key_id"],
        "api_key_name": pod["api_key_name"],
        "days": days,
        "_last": pod.get("billed_until") or 0,
    }


def statement(state: State, request: Request) -> Response:
    """Answer `{start_day, end_day, total, pods}` for the caller's account (key visibility applies)."""
    cred = state.authenticate(request.headers)
    state.require_scope(cred, "read")
    today = datetime.fromtimestamp(state.clock.now(), UTC).date().isoformat()
    start = _day(request.args.get("start_day"), "start_day", today)
    end = _day(request.args.get("end_day"), "end_day", today)
    if end < start:
        raise ApiError(422, "validation_error", "end_day must not be before start_day")
    key_filter = request.args.get("api_key_id")
    with state.lock:
        state.refresh()  # charge running pods up to now first
        rows = []
        for entry in state.billing_ledger.values():
            pod = entry["pod"]
            if not state.sees(cred, pod["account_id"], pod["api_key_id"]) or (
                key_filter and pod["api_key_id"] != key_filter
            ):
                continue
            row = _row(state, entry, start, end)
            if row is not None:
                rows.append(row)
    rows.sort(key=lambda row: row.pop("_last"), reverse=True)
    total = round(sum(row["total"] for row in rows), 6)
    return json_response({"start_day": start, "end_day": end, "total": total, "pods": rows})


def skew(state: State, request: Request) -> Response:
    """Show (GET) or set (POST `{"statement_skew_usd": 1.5, "day": "YYYY-MM-DD"}`; 0 removes it) the skews."""
    if request.method == "POST":
        body = json_body(request)
        if not isinstance(body, dict) or set(body) - {"statement_skew_usd", "day"}:
            raise ApiError(422, "validation_error", 'Send {"statement_skew_usd": 1.5, "day": "YYYY-MM-DD"}')
        amount = body.get("statement_skew_usd")
        if not isinstance(amount, int | float) or isinstance(amount, bool):
            raise ApiError(422, "validation_error", "statement_skew_usd must be a number of USD")
        if not isinstance(body.get("day"), str):
            raise ApiError(422, "validation_error", "day must be a UTC day YYYY-MM-DD")
        day = _day(body["day"], "day", "")
        with state.lock:
            if amount:
                state.statement_skews[day] = float(amount)
            else:
                state.statement_skews.pop(day, None)
    with state.lock:
        return json_response({"statement_skews": dict(sorted(state.statement_skews.items()))})
