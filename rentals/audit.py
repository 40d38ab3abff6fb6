"""The audit trail on a rental's timeline: staff actions, and support reading a rental.

A staff action (an operator's change, from the ops pages, the admin, the customer pages or the API) is one
`staff_action` event saying who did what and why. A support view is recorded at most once per user and rental
per SUPPORT_VIEW_EVERY, on the ops timeline, the customer pages and the API alike, so reading is cheap to audit.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.utils import timezone

from accounts.models import Membership
from accounts.roles import is_operator, is_staff_reader
from rentals.models import Rental, RentalEvent

SUPPORT_VIEW_EVERY = timedelta(minutes=10)


def staff_action_event(
    *, actor: User, action: str, reason: str, message: str, data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return the timeline entry of a staff action as RentalEvent fields: who, what (`action`) and why, plus
    any other facts in `data`."""
    return {
        "kind": RentalEvent.Kind.STAFF_ACTION,
        "actor": actor,
        "message": message,
        "data": {**(data or {}), "action": action, "reason": reason},
    }


def staff_action_record(*, rental_id: int, actor: User, action: str, reason: str, message: str) -> RentalEvent:
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


def support_view_record(*, rental: Rental, user: User) -> bool:
    """Record that support opened the rental's timeline, at most once per user and rental per 10 minutes."""
    now = timezone.now()
    recent = RentalEvent.objects.filter(
        rental_id=rental.pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor=user, at__gte=now - SUPPORT_VIEW_EVERY
    ).exists()
    if recent:
        return False
    RentalEvent.objects.create(
        rental_id=rental.pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor=user, message=f"Viewed by {user.get_username()}."
    )
    return True


def support_reads(*, user: AbstractBaseUser | AnonymousUser, rentals: Iterable[Rental]) -> None:
    """Record a support view of each rental that is not of the reader's own customers (operators: none)."""
    if not is_staff_reader(user) or is_operator(user) or user.pk is None:
        return
    rentals = list(rentals)
    if not rentals:
        return
    own = set(Membership.objects.filter(user_id=user.pk).values_list("customer_id", flat=True))
    outside = {rental.pk: rental for rental in rentals if rental.customer_id not in own}
    # One query finds the rentals already recorded within the interval, so a listed page costs no query per row.
    recent = set(
        RentalEvent.objects.filter(
            rental_id__in=outside,
            kind=RentalEvent.Kind.SUPPORT_VIEW,
            actor_id=user.pk,
            at__gte=timezone.now() - SUPPORT_VIEW_EVERY,
        ).values_list("rental_id", flat=True)
    )
    for pk, rental in outside.items():
        if pk not in recent:
            support_view_record(rental=rental, user=user)  # type: ignore[arg-type]
