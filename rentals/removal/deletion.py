"""Cluster removal: at most one live `DELETE /clusters/{id}` retry chain per terminating rental.

A worker claims the next DELETE by moving `Rental.next_delete_at` forward with a conditional UPDATE (like
the rent claim), so a duplicate message, a sweeper's copy or a second worker finds nothing due and sends
nothing. Failures back off exponentially with jitter; only the claim's winner enqueues the next try.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from common.backoff import backoff_seconds
from rentals import upstream
from rentals.models import Rental, RentalEvent
from rentals.ready_time import first_ready_fields
from rentals.states import RentalStatus
from rentals.transitions import rental_touch, rental_transition
from rentals.verification.records import check_unsettled

# After Lium accepted the removal, the pod poller sees the members go; DELETE again (it is idempotent) only
# if they are still listed this much later.
RECHECK_AFTER_STARTED_SECONDS = 300


def delete_backoff(*, attempts: int) -> float:
    """Return seconds to wait after `attempts` failed DELETEs: exponential, capped, with jitter."""
    return backoff_seconds(
        failures=attempts,
        base=settings.CLUSTER_DELETE_BACKOFF_BASE_SECONDS,
        cap=settings.CLUSTER_DELETE_BACKOFF_CAP_SECONDS,
    )


def cluster_delete_claim(*, rental_id: int) -> bool:
    """Take the rental's next DELETE if it is due; return whether this caller got it."""
    now = timezone.now()
    # Held for as long as the call may take; a worker that dies leaves it due again after that.
    held_until = now + timedelta(seconds=settings.RENT_LEASE_SECONDS)
    due = Q(next_delete_at__isnull=True) | Q(next_delete_at__lte=now)
    return (
        Rental.objects.filter(due, pk=rental_id, status=RentalStatus.TERMINATING).update(next_delete_at=held_until) == 1
    )


@dataclass(frozen=True)
class DeleteOutcome:
    outcome: str  # "not-due", or what `rental_delete_cluster` returned
    retry_in: float | None = None  # seconds until the next try, when it should be enqueued


def cluster_delete_attempt(*, rental_id: int) -> DeleteOutcome:
    """Claim the rental's DELETE, send it, and schedule the next one if it failed."""
    if not cluster_delete_claim(rental_id=rental_id):
        return DeleteOutcome("not-due")
    outcome = rental_delete_cluster(rental_id=rental_id)
    attempts = Rental.objects.filter(pk=rental_id).values_list("delete_attempts", flat=True).first() or 0
    if outcome not in ("retry", "started"):
        return DeleteOutcome(outcome)
    delay = delete_backoff(attempts=attempts + 1) if outcome == "retry" else RECHECK_AFTER_STARTED_SECONDS
    Rental.objects.filter(pk=rental_id, status=RentalStatus.TERMINATING).update(
        next_delete_at=timezone.now() + timedelta(seconds=delay), delete_attempts=F("delete_attempts") + 1
    )
    return DeleteOutcome(outcome, retry_in=delay if outcome == "retry" else None)


def due_for_delete(*, now_overdue: timedelta, unscheduled_after: timedelta) -> Q:
    """Return the terminating rentals whose DELETE is overdue (its message was lost) or was never scheduled."""
    now = timezone.now()
    return Q(status=RentalStatus.TERMINATING) & (
        Q(next_delete_at__lte=now - now_overdue)
        | Q(next_delete_at__isnull=True, updated_at__lte=now - unscheduled_after)
    )


def rental_delete_cluster(*, rental_id: int) -> str:
    """Call `DELETE /clusters/{id}` for a terminating rental and record each member's result.

    Return "not-terminating", "gone", "refused", "retry" (call again later) or "started".
    """
    rental = Rental.objects.select_related("credential").filter(pk=rental_id, status=RentalStatus.TERMINATING).first()
    if rental is None:
        return "not-terminating"
    if not rental.cluster_id:
        # Never DELETE /clusters/ with an empty id: its 404 would read as "already gone".
        return "retry"
    client = upstream.client_for(rental.credential)
    try:
        answer = client.delete_cluster(rental.cluster_id)
    except upstream.NotFound:
        rental_transition(
            rental_id=rental.pk,
            from_status=RentalStatus.TERMINATING,
            to_status=RentalStatus.TERMINATED,
            message="Lium has no pod with this cluster id: the cluster is gone.",
        )
        return "gone"
    except upstream.Conflict as exc:
        message = f"Lium cannot remove the cluster yet ({exc.message}); trying again shortly."
        _delete_event_record(rental, message, {"request_id": exc.request_id})
        return "retry"
    except upstream.UpstreamUnavailable as exc:
        _delete_event_record(rental, f"Remove failed for now ({exc.message}); trying again shortly.")
        return "retry"
    except upstream.UpstreamRejected as exc:
        _back_from_refused_delete(rental, exc)
        return "refused"
    # A 200 always has member rows (upstream.delete_cluster raises MalformedAnswer otherwise): the removal
    # was accepted; the pod listing confirms it (rentals.tracking.members).
    with transaction.atomic():
        RentalEvent.objects.create(
            rental=rental,
            kind=RentalEvent.Kind.MEMBER,
            message=answer.message or "Removal started.",
            data={
                "delete_accepted": True,
                "success": answer.success,
                "pods": [{"pod_id": row.pod_id, "success": row.success, "message": row.message} for row in answer.rows],
            },
        )
        rental_touch(rental_id=rental.pk)  # open pages show each member's result (`web/panels.terminate_results`)
    # Some members could not be removed; calling again retries those (upstream-api.md §10).
    return "started" if answer.success else "retry"


def _delete_event_record(rental: Rental, message: str, data: dict[str, Any] | None = None) -> None:
    """Put a DELETE that failed for now on the rental's timeline."""
    RentalEvent.objects.create(rental=rental, kind=RentalEvent.Kind.STATE, message=message, data=data or {})


def _back_from_refused_delete(rental: Rental, refusal: upstream.UpstreamRejected) -> None:
    """Move a rental whose DELETE Lium refused back to what its members show; nothing was removed."""
    back_to = RentalStatus.READY if rental.members.exclude(status="RUNNING").count() == 0 else RentalStatus.DEGRADED
    if back_to == RentalStatus.READY and check_unsettled(rental):
        back_to = RentalStatus.CHECK_FAILED  # never verified, never kept: not ready
    rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.TERMINATING,
        to_status=back_to,
        message=f"Lium refused to remove the cluster: {refusal.message}. Nothing was removed.",
        error_code=refusal.code,
        error_message=refusal.message,
        error_request_id=refusal.request_id,
        # Terminated before its first ready (members still starting): this is its first ready.
        **(first_ready_fields(rental) if back_to == RentalStatus.READY else {}),
    )
