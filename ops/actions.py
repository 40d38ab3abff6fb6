"""Operator actions on a rental: what each is called and when it is offered, and running one.

The ops pages offer and confirm them (`ops.views`); each runs one `ops.services` function, which records it
once as a staff action on the rental's timeline.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from ops import services
from rentals.models import Rental, RentalEvent
from rentals.states import HOLDS_CLUSTER_STATES, RentalStatus

# What each action is called, which states it applies to, and what the confirmation asks.
ACTIONS: dict[str, dict[str, Any]] = {
    "retry": {
        "label": "Retry now",
        "states": (RentalStatus.RETRYING, RentalStatus.UNKNOWN),
        "danger": False,
        "confirm": "Send the stored order again now, with the same key and bytes?",
    },
    "reconcile": {
        "label": "Reconcile",
        # A rented rental only while its members have not appeared (see `rental_attention_reason`).
        "states": (RentalStatus.UNKNOWN, RentalStatus.RENTED),
        "danger": False,
        "confirm": "Look in Lium's pod list for the cluster this order may have created?",
    },
    "confirm": {
        "label": "Confirm reconciliation",
        "states": (RentalStatus.UNKNOWN,),
        "danger": True,
        "confirm": "Settle this rental for good as chosen?",
    },
    "terminate": {
        "label": "Terminate cluster",
        "states": tuple(HOLDS_CLUSTER_STATES),
        "danger": True,
        "confirm": "Terminate the cluster? Every node is removed.",
    },
    "cancel": {
        "label": "Cancel order",
        "states": (RentalStatus.QUEUED,),
        "danger": True,
        "confirm": "Cancel this order before it is sent?",
    },
}


def actions_offered(
    rental: Rental, *, finding: RentalEvent | None, attention: str, now: datetime
) -> list[dict[str, Any]]:
    """Return the actions an operator may take on the rental now, each with its label and confirmation."""
    offered = []
    for name, spec in ACTIONS.items():
        if rental.status not in spec["states"]:
            continue
        if name == "reconcile" and rental.status == RentalStatus.RENTED and not attention:
            continue  # its members are on their way, or known
        if name == "confirm" and finding is None:
            continue  # reconcile first: the confirmation offers what it found
        if name == "retry" and services.retry_refusal(rental, now):
            continue
        offered.append({"name": name, **spec})
    return offered


def operator_action_run(action: str, *, rental: Rental, actor: User, form: Any) -> str:
    """Call the service for `action` with the form's reason; return a success message, or "" if nothing changed."""
    reason = form.cleaned_data["reason"]
    if action == "retry":
        return services.ops_retry_now(rental=rental, actor=actor, reason=reason)
    if action == "reconcile":
        return f"Reconciliation: {services.ops_reconcile(rental=rental, actor=actor, reason=reason)}"
    if action == "confirm":
        moved = services.ops_confirm_reconciliation(
            rental=rental, actor=actor, cluster_id=form.cluster_id, reason=reason
        )
        return "Settled." if moved else ""
    if action == "terminate":
        return "Removing the cluster." if services.ops_terminate(rental=rental, actor=actor, reason=reason) else ""
    return "Cancelled. Nothing was rented." if services.ops_cancel(rental=rental, actor=actor, reason=reason) else ""
