"""Why a member failed: its events from the upstream (`GET /pods/{id}/events`), fetched once it fails.

The pod poller (`rentals.tracking.members`) marks a member whose status turned failed, or that is gone, by setting
`events_fetched_at` in the same transaction and enqueues one fetch; the task stores what Lium says and bumps
the rental's version so open pages show it. The upstream keeps a pod's events after the pod is gone.
"""

from __future__ import annotations

from functools import partial

from django.db import transaction
from django.utils import timezone

from rentals import upstream
from rentals.enqueue import member_events_enqueue
from rentals.models import ClusterMember, Rental
from rentals.transitions import rental_touch

# Upstream pod statuses that mean the member will not come up by itself.
FAILED_POD_STATUSES = frozenset(
    {
        "CREATION_FAILED",
        "BROKEN",
        "REBOOT_FAILED",
        "FAILED",
        "ERROR",
        "STOPPED",
        "TERMINATED",
        "DELETED",
        "REMOVED",
        "CANCELLED",
    }
)
# The members whose upstream events say why they failed: the failed ones and "GONE" (no longer listed).
EVENTS_WANTED_STATUSES = FAILED_POD_STATUSES | {"GONE"}
EVENTS_KEPT = 50  # the newest ones; the page shows why, not a history


def member_events_request(*, rental: Rental) -> int:
    """Claim and enqueue an events fetch for each of the rental's failed members not fetched yet."""
    claimed = list(
        ClusterMember.objects.filter(
            rental_id=rental.pk, status__in=EVENTS_WANTED_STATUSES, events_fetched_at__isnull=True
        ).values_list("pk", flat=True)
    )
    if not claimed:
        return 0
    ClusterMember.objects.filter(pk__in=claimed, events_fetched_at__isnull=True).update(
        events_fetched_at=timezone.now()
    )
    for member_id in claimed:
        transaction.on_commit(partial(member_events_enqueue, member_id))
    return len(claimed)


def member_events_fetch(*, member_id: int) -> int:
    """Fetch one member's events and store them on it; return how many. Raises UpstreamError to be retried."""
    member = ClusterMember.objects.select_related("rental__credential").filter(pk=member_id).first()
    if member is None:
        return 0
    events = upstream.client_for(member.rental.credential).pod_events(member.pod_id)
    stored = [event.as_dict() for event in events[-EVENTS_KEPT:]]
    with transaction.atomic():
        ClusterMember.objects.filter(pk=member.pk).update(events=stored, events_fetched_at=timezone.now())
        rental_touch(rental_id=member.rental_id)  # open pages show the reason
    return len(stored)
