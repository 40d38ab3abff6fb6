"""The simulator bills: running pods draw their account's balance down on the sim clock, per second.

A pod bills from the moment it is RUNNING (its `ready_at`; a pod that fails to start never bills) until its
removal starts (a DELETE or its scheduled removal), at its `price` per hour. Billing is lazy like the rest of
the state: `accrue` runs at the start of every `State.refresh`, under the state lock, and charges each pod for
the time since it was last charged. When an account's balance reaches 0, every pod of the account is removed
at once, as Lium does. Every charge is also written to the pod's ledger, split at UTC midnights, which
`GET /billing/statement` serves (simulator/routes_billing.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .errors import ApiError

BILLING_STATUSES = ("PENDING", "RUNNING", "REBOOT_PENDING")


def accrue(state: Any, now: float) -> None:
    """Charge every billing pod up to `now` (or its scheduled removal), then cut off accounts that ran dry."""
    dry: set[str] = set()
    for pod in state.pods.values():
        if pod["status"] not in BILLING_STATUSES or pod["will_fail"]:
            continue
        start = max(pod["ready_at"], pod.get("billed_until") or pod["ready_at"])
        stop = now if pod["removal_scheduled_at"] is None else min(now, pod["removal_scheduled_at"])
        if stop <= start:
            continue
        account = state.accounts[pod["account_id"]]
        account["balance"] -= pod["price"] * (stop - start) / 3600.0
        pod["billed_until"] = stop
        _ledger_add(state, pod, start, stop)
        if account["balance"] <= 0:
            dry.add(account["id"])
    for account_id in dry:
        _cut_off(state, account_id, now)


DAY_SECONDS = 86400


def _ledger_add(state: Any, pod: dict[str, Any], start: float, stop: float) -> None:
    """Write the charge for [start, stop) to the pod's ledger, one entry per UTC day it spans."""
    days = state.billing_ledger.setdefault(pod["id"], {"pod": pod, "days": {}})["days"]
    while start < stop:
        day_end = (start // DAY_SECONDS + 1) * DAY_SECONDS
        part = min(stop, day_end) - start
        day = datetime.fromtimestamp(start, UTC).date().isoformat()
        entry = days.setdefault(day, {"billed_seconds": 0.0, "amount": 0.0})
        entry["billed_seconds"] += part
        entry["amount"] += pod["price"] * part / 3600.0
        start += part


def _cut_off(state: Any, account_id: str, now: float) -> None:
    """Remove every pod of an account whose balance is gone (they go DELETING now)."""
    for pod in state.pods.values():
        if pod["account_id"] == account_id and pod["status"] in BILLING_STATUSES:
            pod.update(status="DELETING", updated_at=now, deleting_until=now + state.config["delete_seconds"])
            why = {"reason": "balance"}
            state.add_event(pod, "deleting", "Account balance exhausted: pod removed", now, detail=why)


def balance(state: Any, account_id: str) -> float:
    """Return the account's balance as `GET /users/me` shows it (rounded to 1/10000 USD)."""
    return round(state.accounts[account_id]["balance"], 4)


def set_balances(state: Any, balances: Any) -> None:
    """Set account balances from `{"acct-main": 12.5, ...}` (the `balances` of `POST /_sim/config`)."""
    if not isinstance(balances, dict):
        raise ApiError(422, "validation_error", 'balances must be an object like {"acct-main": 12.5}')
    for account_id, value in balances.items():
        if account_id not in state.accounts:
            raise ApiError(422, "validation_error", f"unknown account {account_id!r}; known: {sorted(state.accounts)}")
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ApiError(422, "validation_error", f"the balance of {account_id} must be a number")
    with state.lock:
        state.refresh()  # charge up to now at the old balance first
        for account_id, value in balances.items():
            state.accounts[account_id]["balance"] = float(value)
