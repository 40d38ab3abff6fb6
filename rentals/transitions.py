"""Apply a state change as a conditional UPDATE on the expected current state.

Exactly one row changes, or someone else got there first and this caller does nothing. An illegal
transition is refused with an exception, never silently applied.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from common.backoff import backoff_seconds
from rentals.enqueue import reconcile_look_enqueue
from rentals.models import Rental, RentalEvent
from rentals.signals import rental_status_changed
from rentals.states import RentalStatus, can_transition


class IllegalTransition(Exception):
    """A caller asked for a state change the state machine does not allow."""


def rental_transition(
    *,
    rental_id: int,
    from_status: str,
    to_status: str,
    expect_lease: uuid.UUID | None = None,
    expect_version: int | None = None,
    actor: User | None = None,
    message: str = "",
    data: dict[str, Any] | None = None,
    kind: str = RentalEvent.Kind.STATE,
    **fields: Any,
) -> bool:
    """Move a rental from `from_status` to `to_status` and record the event; return whether it moved."""
    if not can_transition(from_status, to_status):
        raise IllegalTransition(f"A rental cannot go from {from_status} to {to_status}.")
    now = timezone.now()
    first_look_in = _first_look_in() if to_status == RentalStatus.UNKNOWN else None
    fields = {**_entering(from_status, to_status, now, first_look_in), **fields}
    rows = Rental.objects.filter(pk=rental_id, status=from_status)
    if expect_lease is not None:
        # Only the worker that still holds the lease may settle the attempt.
        rows = rows.filter(lease_token=expect_lease)
    if expect_version is not None:
        # The row is exactly as the caller read it (e.g. a claim that computed the next attempt number from it).
        rows = rows.filter(version=expect_version)
    with transaction.atomic():
        changed = rows.update(status=to_status, version=F("version") + 1, updated_at=now, **fields)
        if changed:
            if first_look_in is not None:
                # The engine looks for the cluster itself (rentals.tracking.reconcile); the sweeper re-sends a lost one.
                transaction.on_commit(lambda: reconcile_look_enqueue(rental_id, countdown=first_look_in))
            RentalEvent.objects.create(
                rental_id=rental_id,
                kind=kind,
                actor=actor,
                from_status=from_status,
                to_status=to_status,
                message=message,
                data=data or {},
            )
            # Inside the transaction: an outbox written by a receiver commits or rolls back with this change.
            rental_status_changed.send(sender=Rental, rental_id=rental_id, from_status=from_status, to_status=to_status)
    return changed == 1


def _first_look_in() -> float:
    """Return seconds until an unknown rental's first automatic look (`rentals.tracking.reconcile`)."""
    base = settings.RECONCILE_LOOK_BASE_SECONDS
    return backoff_seconds(failures=1, base=base, cap=base)


def _entering(from_status: str, to_status: str, now: datetime, first_look_in: float | None) -> dict[str, Any]:
    """Return the bookkeeping a state starts with (a caller's own values win)."""
    fields: dict[str, Any] = {}
    if from_status == RentalStatus.UNKNOWN:
        fields["next_reconcile_at"] = None  # settled or replayed: no more automatic looks
    if to_status == RentalStatus.UNKNOWN and first_look_in is not None:
        fields.update(next_reconcile_at=now + timedelta(seconds=first_look_in), reconcile_looks=0)
    if to_status == RentalStatus.RENTED:
        fields["rented_at"] = now  # its members are expected within RENT_MEMBERS_GRACE_SECONDS
    if to_status == RentalStatus.TERMINATING:
        # A new removal starts its own DELETE retry chain, not held back by an earlier one's backoff.
        fields.update(next_delete_at=None, delete_attempts=0)
    return fields


# Only `rental_transition` changes these: a state change is recorded, checked and announced.
STATE_FIELDS = frozenset({"status", "lease_token", "lease_until", "version"})


def rental_touch(*, rental_id: int, in_status: str | None = None, **fields: Any) -> bool:
    """Update fields that change what the page shows, without a state change (bumps the version).

    With `in_status`, only while the rental is in that state. Return whether the row changed.
    """
    if STATE_FIELDS & fields.keys():
        raise IllegalTransition(f"rental_touch does not change {sorted(STATE_FIELDS & fields.keys())}.")
    rows = Rental.objects.filter(pk=rental_id)
    if in_status is not None:
        rows = rows.filter(status=in_status)
    changed = rows.update(version=F("version") + 1, updated_at=timezone.now(), **fields)
    return changed == 1
