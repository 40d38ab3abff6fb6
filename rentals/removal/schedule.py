"""A cluster's scheduled removal: set, extend or cancel it here, push it to every member upstream.

The rental's `removal_scheduled_at` is the truth the pages count down to; the worker sends it to each member
(`POST /pods/{id}/schedule-removal`, the same time twice is one schedule; `DELETE` on that path cancels), always
the rental's value at sending time, so two quick changes end with the later one upstream.

A customer's removal policy (`rentals.removal.policy`, set by operators) caps how far from now a member may put
the removal, and forbids a member to cancel it; operators are not held to the cap.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import is_operator
from rentals import upstream
from rentals.audit import change_event
from rentals.enqueue import removal_push_enqueue
from rentals.models import Rental, RentalEvent
from rentals.removal.policy import MAX_HOURS, removal_policy_for
from rentals.states import HOLDS_CLUSTER_STATES
from rentals.transitions import rental_touch

logger = logging.getLogger(__name__)


def removal_time(*, hours: int | None = None, at: datetime | None = None, now: datetime | None = None) -> datetime:
    """Return the removal time `hours` from now or at `at` (aware, in the future, at most 720 h away)."""
    now = now or timezone.now()
    if (hours is None) == (at is None):
        raise ValidationError("Give either a number of hours or a time, not both.", code="hours_or_at")
    if hours is not None:
        if isinstance(hours, bool) or not 1 <= hours <= MAX_HOURS:
            raise ValidationError(f"Enter whole hours from 1 to {MAX_HOURS}.", code="invalid_hours")
        return (now + timedelta(hours=hours)).replace(microsecond=0)
    assert at is not None
    if at.tzinfo is None:
        raise ValidationError("Give the time with its zone, e.g. 2030-01-01T12:00:00Z.", code="naive_time")
    if at <= now + timedelta(minutes=1):
        raise ValidationError("The removal time must be at least a minute from now.", code="time_past")
    if at > now + timedelta(hours=MAX_HOURS):
        raise ValidationError(f"The removal time must be within {MAX_HOURS} hours from now.", code="time_too_far")
    return at.astimezone(now.tzinfo).replace(microsecond=0)


def _change_allowed_check(rental: Rental) -> None:
    if rental.status not in HOLDS_CLUSTER_STATES:
        raise ValidationError("Only a rented cluster has a removal to schedule or cancel.", code="no_cluster")
    # The rent answer's pod ids are enough to set the time; it reaches the members once the pods sync attached them.
    if not rental.pod_ids and not rental.members.exists():
        raise ValidationError("The cluster's members are not known yet; try again in a moment.", code="no_members")


def _held_to_policy(actor: AbstractBaseUser | AnonymousUser | None) -> bool:
    return actor is None or not is_operator(actor)


def rental_schedule_removal(
    *, rental: Rental, actor: User | None, hours: int | None = None, at: datetime | None = None
) -> datetime:
    """Set (or move) when every member is removed, record it on the timeline, and have the worker push it."""
    _change_allowed_check(rental)
    now = timezone.now()
    when = removal_time(hours=hours, at=at, now=now)
    policy = removal_policy_for(rental.customer_id)
    limit = policy.max_hours if policy is not None and _held_to_policy(actor) else None
    if limit is not None and when > now + timedelta(hours=limit):
        raise ValidationError(
            f"{rental.customer.name}'s clusters may be kept at most {limit} hours from now; "
            "pick an earlier time or ask an operator.",
            code="over_max_hours",
        )
    before = rental.removal_scheduled_at
    was = f" (was {before:%Y-%m-%d %H:%M} UTC)" if before else ""
    _removal_change(rental, actor, "schedule_removal", when, f"Removal scheduled for {when:%Y-%m-%d %H:%M} UTC{was}.")
    return when


def rental_cancel_removal(*, rental: Rental, actor: User | None) -> bool:
    """Cancel the scheduled removal; return False when none was scheduled. Refused under a maximum."""
    _change_allowed_check(rental)
    before = rental.removal_scheduled_at
    if before is None:
        return False
    policy = removal_policy_for(rental.customer_id)
    if _held_to_policy(actor) and policy is not None and policy.max_hours is not None:
        raise ValidationError(
            f"{rental.customer.name}'s clusters are removed after at most {policy.max_hours} hours, so the removal "
            "cannot be cancelled; move it instead, or ask an operator.",
            code="over_max_hours",
        )
    message = f"Scheduled removal cancelled (was {before:%Y-%m-%d %H:%M} UTC); the cluster runs until terminated."
    _removal_change(rental, actor, "cancel_removal", None, message)
    return True


def _removal_change(rental: Rental, actor: User | None, action: str, when: datetime | None, message: str) -> None:
    """Store the new removal time, record who changed it (and from what), and have the worker push it."""
    before = rental.removal_scheduled_at
    data = {
        "action": action,  # also for members' changes: `removal_adopt_from_members` looks for it
        "removal_scheduled_at": when.isoformat() if when else None,
        "previous": before.isoformat() if before else None,
    }
    with transaction.atomic():
        rental_touch(rental_id=rental.pk, removal_scheduled_at=when)
        RentalEvent.objects.create(
            rental=rental, **change_event(actor=actor, action=action, reason="", message=message, data=data)
        )
        transaction.on_commit(lambda: removal_push_enqueue(rental.pk))
    rental.removal_scheduled_at = when


def rental_removal_push(*, rental_id: int) -> int:
    """Send the rental's removal time (or its cancel) to every live member; return how many were told.

    Safe to repeat: the same time twice is one schedule, a cancel twice is one cancel. A member the upstream
    no longer knows (404) is skipped; any other failure raises, and the task retries.
    """
    rental = Rental.objects.select_related("credential").filter(pk=rental_id).first()
    if rental is None or rental.status not in HOLDS_CLUSTER_STATES:
        return 0
    # Only the rental's own member rows: the rent answer's pod ids are a claim that may name another rental's pods.
    pod_ids = list(rental.members.filter(gone_at__isnull=True).values_list("pod_id", flat=True))
    client = upstream.client_for(rental.credential)
    at = rental.removal_scheduled_at
    told = 0
    for pod_id in pod_ids:
        try:
            if at is None:
                client.cancel_removal(pod_id)
            else:
                client.schedule_removal(pod_id, at.isoformat().replace("+00:00", "Z"))
        except upstream.NotFound:
            logger.info("Pod %s is gone; its removal schedule needs no change.", pod_id)
            continue
        told += 1
    return told


def removal_adopt_from_members(*, rental: Rental, scheduled: list[datetime]) -> bool:
    """Take the members' own removal time (the order's `termination_hours`) when none is set here yet.

    Only while nobody here has scheduled or cancelled this rental's removal: after that ours is the truth and
    the members' times are what the worker is bringing in line.
    """
    if rental.removal_scheduled_at is not None or not scheduled:
        return False
    decided_here = RentalEvent.objects.filter(
        rental_id=rental.pk, data__action__in=["schedule_removal", "cancel_removal", "adopt_removal"]
    ).exists()
    if decided_here:
        return False
    when = min(scheduled)
    rental_touch(rental_id=rental.pk, removal_scheduled_at=when)
    RentalEvent.objects.create(
        rental=rental,
        kind=RentalEvent.Kind.MEMBER,
        message=f"Lium will remove the cluster at {when:%Y-%m-%d %H:%M} UTC (the order's termination hours).",
        data={"action": "adopt_removal", "removal_scheduled_at": when.isoformat()},
    )
    rental.removal_scheduled_at = when
    return True
