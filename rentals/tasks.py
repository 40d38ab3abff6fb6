"""Celery tasks: thin. Each takes primary keys, returns early when there is nothing to do, calls one service.

Enqueueing never raises into a caller: if the broker is down the row is still saved, and the sweeper
(which runs on beat) picks it up once the broker is back.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from rentals import capacity, engine, member_events, members, reconcile, removal, removal_schedule
from rentals.enqueue import (
    enqueue_cluster_delete,
    enqueue_pods_sync,
    enqueue_reconcile_look,
    enqueue_rental_send,
)
from rentals.models import Heartbeat, Rental
from rentals.states import RentalStatus
from rentals.upstream import UpstreamError

logger = logging.getLogger(__name__)

SWEEPER_HEARTBEAT = "sweeper"


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rental_send(rental_id: int, turn: int | None = None) -> str | None:
    """Make one attempt for the rental if it is due (a duplicate delivery finds nothing to claim).

    With `turn`, only if that attempt is the next one: a message for a turn already taken returns
    `engine.STALE_TURN` and does nothing. Without one (the submit, the sweeper, the dispatcher), any due turn.
    """
    return engine.rental_attempt(rental_id=rental_id, turn=turn)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def credential_pods_sync(credential_id: int) -> int:
    """Refresh the members of every tracked rental of one credential from one pod listing.

    While a cluster is starting or being removed, poll again soon; only the caller that won this
    interval's listing re-enqueues, so duplicate chains die out instead of multiplying.
    """
    polled = members.credential_pods_sync(credential_id=credential_id)
    if (
        polled is not None
        and Rental.objects.filter(
            credential_id=credential_id, status__in=(RentalStatus.RENTED, RentalStatus.TERMINATING)
        ).exists()
    ):
        enqueue_pods_sync(credential_id, countdown=settings.POD_POLL_MIN_INTERVAL_SECONDS)
    return polled or 0


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rental_delete_cluster(rental_id: int) -> str:
    """Ask the upstream to remove a terminating rental's cluster, if its DELETE is due.

    Only the worker that claimed this DELETE enqueues the next try, so a rental has one retry chain
    however many copies of the message the sweeper or a redelivery adds.
    """
    result = removal.cluster_delete_attempt(rental_id=rental_id)
    if result.retry_in is not None:
        enqueue_cluster_delete(rental_id, countdown=result.retry_in)
    return result.outcome


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rental_reconcile_look(rental_id: int) -> str:
    """Look for an unknown rental's cluster if its look is due; only the look's claimer enqueues the next."""
    result = reconcile.rental_reconcile_look(rental_id=rental_id)
    if result.next_in is not None:
        enqueue_reconcile_look(rental_id, countdown=result.next_in)
    return result.outcome


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(UpstreamError,), retry_backoff=5, max_retries=8)
def rental_removal_push(rental_id: int) -> int:
    """Push the removal time to every member; retried on upstream errors (the call is idempotent)."""
    return removal_schedule.rental_push_removal_schedule(rental_id=rental_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(UpstreamError,), retry_backoff=5, max_retries=5)
def member_events_fetch(member_id: int) -> int:
    """Store a failed member's events from the upstream (why it failed); retried on upstream errors."""
    return member_events.member_events_fetch(member_id=member_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rentals_sweep() -> dict[str, int]:
    """Re-enqueue rentals that are due or stuck, settle expired ones, and start pod polling."""
    now = timezone.now()
    Heartbeat.objects.update_or_create(name=SWEEPER_HEARTBEAT, defaults={"at": now})
    stuck_queued = now - timedelta(seconds=settings.RENT_QUEUED_STUCK_SECONDS)
    # A retry's own delayed message normally arrives on time; only one that is overdue by this much was lost.
    overdue_by = timedelta(seconds=max(2 * settings.SWEEP_INTERVAL_SECONDS, 5))
    overdue = now - overdue_by
    due_ids = list(
        Rental.objects.filter(
            Q(status=RentalStatus.RETRYING, next_attempt_at__lte=overdue)
            # A queued rental refused a rent slot (next_attempt_at set) has no message: `capacity.dispatch` sends it.
            | Q(status=RentalStatus.QUEUED, updated_at__lte=stuck_queued, next_attempt_at__isnull=True)
            | Q(status=RentalStatus.SENDING, lease_until__lt=now)
        ).values_list("pk", flat=True)[:500]
    )
    settled = 0
    resent: list[int] = []
    for rental_id in due_ids:
        if engine.rental_settle_expired(rental_id=rental_id):
            settled += 1
            continue
        enqueue_rental_send(rental_id)
        resent.append(rental_id)
    # Mark what was just re-sent, so the next sweeps wait a full interval before sending a copy again
    # (otherwise a slow queue fills with copies faster than it drains).
    Rental.objects.filter(pk__in=resent, status=RentalStatus.QUEUED, updated_at__lte=stuck_queued).update(
        updated_at=now
    )
    # Only rows still as selected: a worker may meanwhile have set a later time (e.g. from Retry-After).
    Rental.objects.filter(pk__in=resent, status=RentalStatus.RETRYING, next_attempt_at__lte=overdue).update(
        next_attempt_at=now
    )
    # Rentals refused a rent slot: the free slots go to the next fair ones (normally a finishing attempt did it).
    dispatched = capacity.dispatch(now=now)
    credential_ids = set(
        Rental.objects.filter(status__in=members.TRACKED_STATES).values_list("credential_id", flat=True).distinct()
    )
    for credential_id in credential_ids:
        enqueue_pods_sync(credential_id)
    # A DELETE whose own (delayed) message was lost, or that was never scheduled: enqueue it once, and mark it
    # so the next sweeps wait before adding a copy (copies find nothing to claim and start no chain).
    lost_delete = removal.due_for_delete(now_overdue=overdue_by, unscheduled_after=timedelta(seconds=60))
    delete_ids = list(Rental.objects.filter(lost_delete).values_list("pk", flat=True)[:100])
    for rental_id in delete_ids:
        enqueue_cluster_delete(rental_id)
    Rental.objects.filter(lost_delete, pk__in=delete_ids).update(next_delete_at=now)
    # The same for an unknown rental's automatic look.
    lost_look = Q(status=RentalStatus.UNKNOWN, next_reconcile_at__lte=overdue)
    look_ids = list(Rental.objects.filter(lost_look).values_list("pk", flat=True)[:100])
    for rental_id in look_ids:
        enqueue_reconcile_look(rental_id)
    Rental.objects.filter(lost_look, pk__in=look_ids).update(next_reconcile_at=now)
    return {
        "enqueued": len(due_ids) - settled,
        "settled": settled,
        "dispatched": len(dispatched),
        "pollers": len(credential_ids),
    }


@shared_task
def sqlite_analyze() -> bool:
    """Refresh SQLite's planner statistics (the embedded default only; PostgreSQL's autovacuum does this).

    Without them SQLite plans "my rentals" by sorting the customer's whole history instead of reading the
    (customer, -created_at, -id) index: 300 ms instead of a few at 100,000 rentals. `analysis_limit` samples
    each index, so a run takes milliseconds whatever the size.
    """
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA analysis_limit=1000")
        cursor.execute("ANALYZE")
    return True
