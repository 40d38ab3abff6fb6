"""The audit trail on a rental's timeline: staff actions, and support reading a rental (reads of a customer's
other data: `accounts.audit`).

A staff action (an operator's change, from the ops pages, the admin, the customer pages or the API) is one
`staff_action` event saying who did what and why. A support view is recorded at most once per user and rental
per SUPPORT_VIEW_EVERY, on the ops timeline, the customer pages and the API alike, so reading is cheap to audit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.utils import timezone

from accounts.audit import SUPPORT_VIEW_EVERY, customers_read_by_support, is_support_reader
from accounts.roles import is_operator
from rentals.models import Rental, RentalEvent


def staff_action_event(
    *, actor: User | None, action: str, reason: str, message: str, data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return the timeline entry of a staff action as RentalEvent fields: who (None: the dashboard itself, as
    budget enforcement), what (`action`) and why, plus any other facts in `data`."""
    return {
        "kind": RentalEvent.Kind.STAFF_ACTION,
        "actor": actor,
        "message": message,
        "data": {**(data or {}), "action": action, "reason": reason},
    }


def staff_action_record(*, rental_id: int, actor: User | None, action: str, reason: str, message: str) -> RentalEvent:
    """Record a staff action that changes no state (a state change records it as its transition's event)."""
    return RentalEvent.objects.create(
        rental_id=rental_id, **staff_action_event(actor=actor, action=action, reason=reason, message=message)
    )


def change_event(
    *, actor: User | None, action: str, reason: str, message: str, data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return how a change someone asked for goes on the timeline: an operator's as a staff action, others' as
    a state change by its actor (pass it to `rental_transition`, or to RentalEvent for a change of no state)."""
    if actor is not None and is_operator(actor):
        return staff_action_event(actor=actor, action=action, reason=reason, message=message, data=data)
    return {"kind": RentalEvent.Kind.STATE, "actor": actor, "message": message, "data": data or {}}


def support_view_record(*, rental: Rental, user: User, where: str = "") -> bool:
    """Record that support read the rental (its timeline, or `where`: a list, a download), at most once per
    user and rental per 10 minutes."""
    now = timezone.now()
    recent = RentalEvent.objects.filter(
        rental_id=rental.pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor=user, at__gte=now - SUPPORT_VIEW_EVERY
    ).exists()
    if recent:
        return False
    message = _viewed_by(user, where)
    RentalEvent.objects.create(rental_id=rental.pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor=user, message=message)
    return True


def support_reads(*, user: AbstractBaseUser | AnonymousUser, rentals: Iterable[Rental], where: str = "") -> None:
    """Record a support view of each rental that is not of the reader's own customers (operators: none)."""
    if not is_support_reader(user):
        return
    rentals = list(rentals)
    outside_customers = customers_read_by_support(user=user, customer_ids=[rental.customer_id for rental in rentals])
    outside = {rental.pk: rental for rental in rentals if rental.customer_id in outside_customers}
    if not outside:
        return
    # One query finds the rentals already recorded within the interval, so a listed page costs no query per row.
    recent = set(
        RentalEvent.objects.filter(
            rental_id__in=outside,
            kind=RentalEvent.Kind.SUPPORT_VIEW,
            actor_id=user.pk,
            at__gte=timezone.now() - SUPPORT_VIEW_EVERY,
        ).values_list("rental_id", flat=True)
    )
    message = _viewed_by(user, where)
    # One insert for the whole page: a search or list of 50 rentals costs as much as one.
    RentalEvent.objects.bulk_create(
        RentalEvent(rental_id=pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor_id=user.pk, message=message)
        for pk in outside
        if pk not in recent
    )


def _viewed_by(user: AbstractBaseUser | AnonymousUser, where: str) -> str:
    return f"Viewed by {user.get_username()}" + (f" ({where})." if where else ".")
