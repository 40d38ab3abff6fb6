"""Celery tasks: thin. Each takes primary keys, returns early when there is nothing to do, calls one service.

Enqueueing never raises into a caller: if the broker is down the row is still saved, and the sweeper
(which runs on beat) picks it up once the broker is back.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import connection

from rentals import engine, lium_switch, sweep
from rentals.enqueue import (
    cluster_delete_enqueue,
    pods_sync_enqueue,
    reconcile_look_enqueue,
    reset_poll_enqueue,
)
from rentals.models import ClusterMember, Rental
from rentals.orders import scheduled
from rentals.removal import deletion as removal
from rentals.removal import schedule as removal_schedule
from rentals.repair import calls as repair
from rentals.states import RentalStatus
from rentals.tracking import member_events, members, reconcile
from rentals.upstream import UpstreamError
from rentals.verification import perform as verification

logger = logging.getLogger(__name__)


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
    starting = Rental.objects.filter(
        credential_id=credential_id, status__in=(RentalStatus.RENTED, RentalStatus.TERMINATING)
    ).exists()
    # A member rebooting (rentals.repair.services) is followed as closely as a starting cluster, until it settles.
    rebooting = ClusterMember.objects.filter(
        rental__credential_id=credential_id, rental__status__in=members.TRACKED_STATES, status="REBOOT_PENDING"
    ).exists()
    if polled is not None and (starting or rebooting):
        pods_sync_enqueue(credential_id, countdown=settings.POD_POLL_MIN_INTERVAL_SECONDS)
    return polled or 0


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rental_delete_cluster(rental_id: int) -> str:
    """Ask the upstream to remove a terminating rental's cluster, if its DELETE is due.

    Only the worker that claimed this DELETE enqueues the next try, so a rental has one retry chain
    however many copies of the message the sweeper or a redelivery adds.
    """
    result = removal.cluster_delete_attempt(rental_id=rental_id)
    if result.retry_in is not None:
        cluster_delete_enqueue(rental_id, countdown=result.retry_in)
    return result.outcome


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rental_reconcile_look(rental_id: int) -> str:
    """Look for an unknown rental's cluster if its look is due; only the look's claimer enqueues the next."""
    result = reconcile.rental_reconcile_look(rental_id=rental_id)
    if result.next_in is not None:
        reconcile_look_enqueue(rental_id, countdown=result.next_in)
    return result.outcome


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(UpstreamError,), retry_backoff=5, max_retries=8)
def rental_removal_push(rental_id: int) -> int:
    """Push the removal time to every member; retried on upstream errors (the call is idempotent)."""
    return removal_schedule.rental_removal_push(rental_id=rental_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(UpstreamError,), retry_backoff=5, max_retries=5)
def member_events_fetch(member_id: int) -> int:
    """Store a failed member's events from the upstream (why it failed); retried on upstream errors."""
    return member_events.member_events_fetch(member_id=member_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def member_repair_send(event_id: int) -> str:
    """Send one click's reboot or GPU reset (a redelivered or retried message finds it sent and does nothing)."""
    return repair.member_repair_send(event_id=event_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def member_reset_gpu_poll(event_id: int, turn: int) -> bool:
    """Read a running GPU reset once; only this turn's claimer enqueues the next read (one chain per reset)."""
    again_in = repair.member_reset_gpu_poll(event_id=event_id, turn=turn)
    if again_in is not None:
        reset_poll_enqueue(event_id, turn + 1, countdown=again_in)
    return again_in is not None


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rental_fabric_check(rental_id: int) -> str:
    """Run a verified rental's fabric check (its own queue: a check takes minutes)."""
    return verification.fabric_check_perform(rental_id=rental_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def rentals_sweep() -> dict[str, int]:
    """Re-enqueue rentals that are due or stuck, settle expired ones, and start pod polling."""
    return sweep.rentals_sweep()


@shared_task
def scheduled_rentals_send() -> dict[str, int]:
    """Send the scheduled rentals whose time has come (or refuse those whose nodes are gone): beat, every
    SCHEDULE_SCAN_INTERVAL_SECONDS. Each is moved out of `scheduled` by one conditional UPDATE: sent once."""
    return scheduled.scheduled_send_due()


@shared_task
def cluster_switch_read() -> dict[str, bool | None]:
    """Read Lium's cluster switch of every backend our credentials use (beat, every LIUM_SWITCH_READ_SECONDS)."""
    return lium_switch.cluster_switch_read()


@shared_task
def sqlite_analyze() -> bool:
    """Refresh SQLite's planner statistics (the embedded default only; PostgreSQL's autovacuum does this).

    Without them SQLite plans "my rentals" by sorting the customer's whole history instead of reading the
    (customer, -created_at, -id) index: 300 ms instead of a few at 100,000 rentals. `analysis_limit` samples
    each index, so a run takes milliseconds whatever the size.
    """
    if connection.vendor != "sqlite":
        return False
    # Raw SQL: the ORM has no ANALYZE, and without it "my rentals" misses its 50 ms at 100,000 rentals.
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA analysis_limit=1000")
        cursor.execute("ANALYZE")
    return True
