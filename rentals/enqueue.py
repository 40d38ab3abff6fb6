"""Put rental work on the broker, by task name.

This module imports neither the engine nor the services (nor `rentals.tasks`, which imports both), so any of
them can enqueue without an import cycle. A failed enqueue is only logged: the row is the truth and the
sweeper enqueues what is due from it.
"""

from __future__ import annotations

import logging

from celery import current_app

logger = logging.getLogger(__name__)

RENTAL_SEND = "rentals.tasks.rental_send"
PODS_SYNC = "rentals.tasks.credential_pods_sync"
REMOVAL_PUSH = "rentals.tasks.rental_removal_push"
CLUSTER_DELETE = "rentals.tasks.rental_delete_cluster"
RECONCILE_LOOK = "rentals.tasks.rental_reconcile_look"
MEMBER_EVENTS = "rentals.tasks.member_events_fetch"
REPAIR_SEND = "rentals.tasks.member_repair_send"
RESET_POLL = "rentals.tasks.member_reset_gpu_poll"
FABRIC_CHECK = "rentals.tasks.rental_fabric_check"


def _enqueue(task_name: str, *args: object, countdown: float | None = None) -> None:
    try:
        current_app.send_task(task_name, args=args, countdown=countdown)
    except Exception:  # the broker is down or unreachable: the sweeper will re-enqueue from the row
        logger.warning("Could not enqueue %s%r; the sweeper will pick it up.", task_name, args, exc_info=True)


def rental_send_enqueue(rental_id: int, countdown: float | None = None, *, turn: int | None = None) -> None:
    """Enqueue a send; with `turn` (an attempt number) the message sends only that attempt (`rental_send`)."""
    # Without a turn the message keeps its one-argument shape, which workers from before turns also read.
    args = (rental_id,) if turn is None else (rental_id, turn)
    _enqueue(RENTAL_SEND, *args, countdown=countdown)


def pods_sync_enqueue(credential_id: int, countdown: float | None = None) -> None:
    _enqueue(PODS_SYNC, credential_id, countdown=countdown)


def removal_push_enqueue(rental_id: int) -> None:
    _enqueue(REMOVAL_PUSH, rental_id)


def cluster_delete_enqueue(rental_id: int, countdown: float | None = None) -> None:
    _enqueue(CLUSTER_DELETE, rental_id, countdown=countdown)


def reconcile_look_enqueue(rental_id: int, countdown: float | None = None) -> None:
    _enqueue(RECONCILE_LOOK, rental_id, countdown=countdown)


def member_events_enqueue(member_id: int) -> None:
    _enqueue(MEMBER_EVENTS, member_id)


def repair_send_enqueue(event_id: int) -> None:
    _enqueue(REPAIR_SEND, event_id)


def reset_poll_enqueue(event_id: int, turn: int, countdown: float | None = None) -> None:
    _enqueue(RESET_POLL, event_id, turn, countdown=countdown)


def fabric_check_enqueue(rental_id: int) -> None:
    _enqueue(FABRIC_CHECK, rental_id)
