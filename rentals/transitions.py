"""Apply a state change as a conditional UPDATE on the expected current state.

Exactly one row changes, or someone else got there first and this caller does nothing. An illegal
transition is refused with an exception, never silently applied.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from rentals.models import Rental, RentalEvent
from rentals.polling import forget_poll_state
from rentals.signals import rental_status_changed
from rentals.states import can_transition


class IllegalTransition(Exception):
    """A caller asked for a state change the state machine does not allow."""


def rental_transition(
    *,
    rental_id: int,
    from_status: str,
    to_status: str,
    expect_lease: uuid.UUID | None = None,
    actor: User | None = None,
    message: str = "",
    data: dict[str, Any] | None = None,
    kind: str = RentalEvent.Kind.STATE,
    **fields: Any,
) -> bool:
    """Move a rental from `from_status` to `to_status` and record the event; return whether it moved."""
    if not can_transition(from_status, to_status):
        raise IllegalTransition(f"A rental cannot go from {from_status} to {to_status}.")
    rows = Rental.objects.filter(pk=rental_id, status=from_status)
    if expect_lease is not None:
        # Only the worker that still holds the lease may settle the attempt.
        rows = rows.filter(lease_token=expect_lease)
    with transaction.atomic():
        changed = rows.update(status=to_status, version=F("version") + 1, updated_at=timezone.now(), **fields)
        if changed:
            forget_poll_state(rental_id)
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


def rental_touch(*, rental_id: int, **fields: Any) -> None:
    """Update fields that change what the page shows, without a state change (bumps the version)."""
    Rental.objects.filter(pk=rental_id).update(version=F("version") + 1, updated_at=timezone.now(), **fields)
    forget_poll_state(rental_id)
