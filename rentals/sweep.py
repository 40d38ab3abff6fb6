"""The sweeper (beat, every SWEEP_INTERVAL_SECONDS): finds the work whose own message was lost and enqueues it.

A rental's messages are sent after its row is saved; a message lost with a broker or a worker leaves the row due.
Each pass re-sends what is overdue, settles what expired, dispatches free rent slots, starts pod polling, and
marks what it re-sent so that the next passes wait a full interval before adding another copy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from rentals import capacity, engine
from rentals.enqueue import (
    cluster_delete_enqueue,
    fabric_check_enqueue,
    pods_sync_enqueue,
    reconcile_look_enqueue,
    rental_send_enqueue,
)
from rentals.heartbeats import SWEEPER_HEARTBEAT
from rentals.models import Heartbeat, Rental
from rentals.removal import deletion as removal
from rentals.repair.calls import repairs_sweep
from rentals.states import RentalStatus
from rentals.tracking import members
from rentals.verification import perform as verification

DUE_PER_SWEEP = 500
LOST_PER_SWEEP = 100


def rentals_sweep() -> dict[str, int]:
    """One pass; return how many rentals it re-enqueued, settled and dispatched, and how many pod pollers it
    started."""
    now = timezone.now()
    Heartbeat.objects.update_or_create(name=SWEEPER_HEARTBEAT, defaults={"at": now})
    # A retry's own delayed message normally arrives on time; only one that is overdue by this much was lost.
    overdue_by = timedelta(seconds=max(2 * settings.SWEEP_INTERVAL_SECONDS, 5))
    enqueued, settled = _due_resend(now, overdue=now - overdue_by)
    # Rentals refused a rent slot: the free slots go to the next fair ones (normally a finishing attempt did it).
    dispatched = capacity.dispatch(now=now)
    credential_ids = set(
        Rental.objects.filter(status__in=members.TRACKED_STATES).values_list("credential_id", flat=True).distinct()
    )
    for credential_id in credential_ids:
        pods_sync_enqueue(credential_id)
    # A DELETE whose own (delayed) message was lost, or that was never scheduled; an unknown rental's lost look.
    # Each is marked so that the next sweeps wait before adding a copy (copies find nothing to claim).
    lost_delete = removal.due_for_delete(now_overdue=overdue_by, unscheduled_after=timedelta(seconds=60))
    resent = _lost_resend(lost_delete, cluster_delete_enqueue)
    Rental.objects.filter(lost_delete, pk__in=resent).update(next_delete_at=now)
    lost_look = Q(status=RentalStatus.UNKNOWN, next_reconcile_at__lte=now - overdue_by)
    resent = _lost_resend(lost_look, reconcile_look_enqueue)
    Rental.objects.filter(lost_look, pk__in=resent).update(next_reconcile_at=now)
    repairs = repairs_sweep()  # member repairs whose message was lost
    # Verified rentals: a lost or abandoned check runs again; keys no check will use are destroyed.
    for rental_id in verification.fabric_check_lost():
        fabric_check_enqueue(rental_id)
    verification.fabric_check_discard()
    return {
        "enqueued": enqueued,
        "settled": settled,
        "dispatched": len(dispatched),
        "pollers": len(credential_ids),
        "repairs": repairs,
    }


def _due_resend(now: datetime, *, overdue: datetime) -> tuple[int, int]:
    """Settle the expired of the due or stuck rentals and re-send the others; return (re-sent, settled)."""
    stuck_queued = now - timedelta(seconds=settings.RENT_QUEUED_STUCK_SECONDS)
    due_ids = list(
        Rental.objects.filter(
            Q(status=RentalStatus.RETRYING, next_attempt_at__lte=overdue)
            # A queued rental refused a rent slot (next_attempt_at set) has no message: `capacity.dispatch` sends it.
            | Q(status=RentalStatus.QUEUED, updated_at__lte=stuck_queued, next_attempt_at__isnull=True)
            | Q(status=RentalStatus.SENDING, lease_until__lt=now)
        ).values_list("pk", flat=True)[:DUE_PER_SWEEP]
    )
    resent = [pk for pk in due_ids if not engine.rental_settle_expired(rental_id=pk)]
    for rental_id in resent:
        rental_send_enqueue(rental_id)
    # Mark what was just re-sent, so the next sweeps wait a full interval before sending a copy again
    # (otherwise a slow queue fills with copies faster than it drains).
    Rental.objects.filter(pk__in=resent, status=RentalStatus.QUEUED, updated_at__lte=stuck_queued).update(
        updated_at=now
    )
    # Only rows still as selected: a worker may meanwhile have set a later time (e.g. from Retry-After).
    Rental.objects.filter(pk__in=resent, status=RentalStatus.RETRYING, next_attempt_at__lte=overdue).update(
        next_attempt_at=now
    )
    return len(resent), len(due_ids) - len(resent)


def _lost_resend(lost: Q, enqueue: Callable[[int], Any]) -> list[int]:
    """Enqueue once each of the first rentals matching `lost`; return their ids."""
    ids = list(Rental.objects.filter(lost).values_list("pk", flat=True)[:LOST_PER_SWEEP])
    for rental_id in ids:
        enqueue(rental_id)
    return ids
