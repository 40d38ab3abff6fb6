"""Reconciliation: find the cluster an order may have created, and settle what the pod listing proves.

An `unknown` rental looks for itself: `rentals.transitions` schedules the first look when a rental becomes
`unknown`, each look claims its turn with a conditional UPDATE on `next_reconcile_at` (so a duplicate
message or a sweeper's copy lists nothing), and the looks stop after RECONCILE_MAX_LOOKS with backoff
(the cluster may show in `GET /pods` a little after the order). Exactly one matching cluster settles the
rental `rented` with the evidence; two or more need an operator; none keeps it `unknown` with the time of
the last look. Operators run the same look by hand, also for a `rented` rental whose members never appeared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from common.backoff import backoff_seconds
from rentals import services, upstream
from rentals.enqueue import enqueue_pods_sync
from rentals.models import Rental, RentalEvent
from rentals.states import HOLDS_CLUSTER_STATES, RentalStatus
from rentals.transitions import rental_touch, rental_transition

logger = logging.getLogger(__name__)

# How long a look may take before another may start (one pod listing, bounded by the client's timeout).
LOOK_HELD_SECONDS = 120


def max_looks() -> int:
    """Return how many automatic looks an `unknown` rental gets."""
    return settings.RECONCILE_MAX_LOOKS


def look_delay(*, looks_done: int) -> float:
    """Return seconds until the next automatic look: base, then doubling, with jitter."""
    base = settings.RECONCILE_LOOK_BASE_SECONDS
    return backoff_seconds(failures=looks_done + 1, base=base, cap=base * 2**settings.RECONCILE_MAX_LOOKS)


@dataclass(frozen=True)
class LookResult:
    outcome: str  # "not-due", "rented", "found" (a rented rental's cluster), "no_match", "ambiguous", "listing_failed"
    next_in: float | None = None  # seconds until the next automatic look, when one should be enqueued


def reconcile_look_claim(*, rental_id: int) -> bool:
    """Take the unknown rental's due look; return whether this caller got it."""
    now = timezone.now()
    rows = Rental.objects.filter(pk=rental_id, status=RentalStatus.UNKNOWN, next_reconcile_at__lte=now)
    return rows.update(next_reconcile_at=now + timedelta(seconds=LOOK_HELD_SECONDS)) == 1


def rental_reconcile_look(*, rental_id: int) -> LookResult:
    """Make the unknown rental's next automatic look, if it is due."""
    if not reconcile_look_claim(rental_id=rental_id):
        return LookResult("not-due")
    rental = Rental.objects.select_related("credential").get(pk=rental_id)
    return rental_look(rental=rental, actor=None)


def rental_look(*, rental: Rental, actor: User | None) -> LookResult:
    """Look in `GET /pods` for the rental's cluster and settle what the listing proves.

    `actor` None is an automatic look (it counts against the rental's looks and schedules the next one);
    an operator's look changes no schedule.
    """
    now = timezone.now()
    automatic = actor is None
    looks = rental.reconcile_looks + (1 if automatic else 0)
    try:
        finding = services.rental_reconcile(rental=rental, actor=actor)
    except (upstream.UpstreamError, ValueError) as exc:
        RentalEvent.objects.create(
            rental_id=rental.pk,
            kind=RentalEvent.Kind.RECONCILE,
            actor=actor,
            message=f"Could not list Lium's pods to look for the cluster: {exc}",
            data={"result": "listing_failed", "cluster_ids": [], "checked_at": now.isoformat()},
        )
        outcome = "listing_failed"
    else:
        if finding.result == "match":
            return _found(
                rental=rental,
                actor=actor,
                cluster_id=finding.cluster_ids[0],
                evidence=finding.evidence,
                looks=looks,
                now=now,
            )
        outcome = finding.result
    fields: dict[str, Any] = {"last_reconcile_at": now}
    next_in = None
    if automatic and rental.status == RentalStatus.UNKNOWN:
        fields["reconcile_looks"] = looks
        # Another look may find a cluster that was not listed yet; it cannot choose between two.
        if outcome != "ambiguous" and looks < max_looks():
            next_in = look_delay(looks_done=looks)
            fields["next_reconcile_at"] = now + timedelta(seconds=next_in)
        else:
            fields["next_reconcile_at"] = None
    with transaction.atomic():
        rental_touch(rental_id=rental.pk, **fields)
        if automatic and next_in is None and outcome != "ambiguous":
            RentalEvent.objects.create(
                rental_id=rental.pk,
                kind=RentalEvent.Kind.RECONCILE,
                message=(
                    f"Stopped looking after {looks} looks without finding the cluster. Reconcile again by hand, "
                    "ask Lium, or confirm it not rented."
                ),
                data={"result": "stopped", "looks": looks},
            )
    return LookResult(outcome, next_in=next_in)


def _found(
    *, rental: Rental, actor: User | None, cluster_id: str, evidence: dict[str, Any], looks: int, now: datetime
) -> LookResult:
    """Record the one cluster found: an unknown rental becomes `rented`, a rented one learns its cluster."""
    pod_ids = [str(pod_id) for pod_id in evidence.get("pod_ids", [])]
    executors = [str(executor) for executor in evidence.get("executors", [])]
    message = (
        f"Reconciliation found the cluster: {cluster_id}, pods {', '.join(pod_ids) or '—'} on executors "
        f"{', '.join(executors) or '—'}, created after the order."
    )
    data = {"cluster_id": cluster_id, "pod_ids": pod_ids, "executors": executors, "looks": looks}
    with transaction.atomic():
        if rental.status == RentalStatus.UNKNOWN:
            moved = rental_transition(
                rental_id=rental.pk,
                from_status=RentalStatus.UNKNOWN,
                to_status=RentalStatus.RENTED,
                actor=actor,
                message=message,
                data=data,
                cluster_id=cluster_id,
                pod_ids=pod_ids,
                # The outcome is known now; the old error stays on the timeline, not on the rental.
                error_code="",
                error_message="",
                error_hint="",
                last_reconcile_at=now,
                reconcile_looks=looks,
                next_reconcile_at=None,
            )
            outcome = "rented"
        elif rental.status in HOLDS_CLUSTER_STATES:
            moved = (
                Rental.objects.filter(pk=rental.pk, status=rental.status, cluster_id="").update(
                    cluster_id=cluster_id, pod_ids=pod_ids
                )
                == 1
            )
            if moved:
                rental_touch(rental_id=rental.pk, last_reconcile_at=now)
                RentalEvent.objects.create(
                    rental_id=rental.pk, kind=RentalEvent.Kind.RECONCILE, actor=actor, message=message, data=data
                )
            outcome = "found"
        else:
            return LookResult("not-due")
        if moved:
            transaction.on_commit(lambda: enqueue_pods_sync(rental.credential_id))
    return LookResult(outcome if moved else "not-due")
