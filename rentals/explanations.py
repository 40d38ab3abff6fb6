"""What a customer is told about a rental (the page's banner, the API's `explanation`).

Mostly its state's sentence; but a `rented` rental whose nodes have not appeared within the grace (the ops
attention rule, `selectors.rental_members_overdue`) says so, that support has been alerted, and what the customer can
do: a delete goes by the cluster's id, so Terminate is only offered once that id is known.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from rentals.models import Rental
from rentals.selectors import members_grace, rental_members_overdue
from rentals.states import CUSTOMER_EXPLANATIONS, RentalStatus

NOT_SENT_AT_ITS_TIME = "Your scheduled order was not sent at its time. Nothing was rented and nothing is billed."
NOT_SENT = "Your order was not sent to Lium. Nothing was rented and nothing is billed."


class Explanation(NamedTuple):
    text: str
    warning: bool  # something is wrong that the state's name does not say


def rental_explanation(rental: Rental, *, now: datetime) -> Explanation:
    """Return what the customer is told about the rental at `now` (one query for a `rented` rental)."""
    if rental.status == RentalStatus.REFUSED and not rental.attempt_count:
        # Refused by us before any send: at its start time (`rentals.orders.scheduled`), or renting off too long.
        return Explanation(NOT_SENT_AT_ITS_TIME if rental.start_at is not None else NOT_SENT, warning=False)
    if not rental_members_overdue(rental=rental, now=now):
        return Explanation(CUSTOMER_EXPLANATIONS.get(rental.status, ""), warning=False)
    return Explanation(_members_overdue_text(rental), warning=True)


def members_grace_text() -> str:
    """Return how long a `rented` rental's nodes may take to appear, for people ("10 min")."""
    seconds = int(members_grace().total_seconds())
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"


def _members_overdue_text(rental: Rental) -> str:
    said = (
        f"Lium confirmed the rental, but no node has appeared in Lium's pod list within {members_grace_text()}. "
        "Support has been alerted (it is on their attention list) and can reconcile it: find the cluster at Lium. "
    )
    if rental.cluster_id:
        return said + (
            "You can wait (this updates by itself when the nodes appear), or terminate the cluster if you no "
            "longer need it."
        )
    return said + (
        "Its cluster id is not known yet. You can wait (this updates by itself when the nodes appear). "
        "Terminate becomes possible once the cluster is found; to have it removed sooner, ask support, "
        "quoting this rental's idempotency key."
    )
