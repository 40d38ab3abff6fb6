"""Track rented clusters' members from `GET /pods`: one listing per credential serves all its rentals.

The upstream caps pod listings at about 60 a minute per account, so one poller per credential (a lease
on a Heartbeat row) lists pods at most every POD_POLL_MIN_INTERVAL_SECONDS, whatever the number of rentals.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import UpstreamCredential
from rentals import upstream
from rentals.models import ClusterMember, Heartbeat, Rental, RentalEvent
from rentals.states import RentalStatus as S
from rentals.transitions import rental_touch, rental_transition

logger = logging.getLogger(__name__)

TRACKED_STATES = (S.RENTED, S.READY, S.DEGRADED, S.TERMINATING)
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


def poller_name(credential_id: int) -> str:
    return f"pods:{credential_id}"


def pods_poll_lease(*, credential_id: int) -> bool:
    """Claim this interval's pod listing for the credential; return whether this caller got it."""
    now = timezone.now()
    name = poller_name(credential_id)
    Heartbeat.objects.get_or_create(name=name, defaults={"at": now - timedelta(days=1)})
    interval = timedelta(seconds=settings.POD_POLL_MIN_INTERVAL_SECONDS)
    # A conditional UPDATE: of several workers asking at once, exactly one gets this interval's listing.
    return Heartbeat.objects.filter(name=name, at__lte=now - interval).update(at=now) == 1


def _decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def credential_pods_sync(*, credential_id: int, force: bool = False) -> int | None:
    """List the credential's pods once and update every tracked rental.

    Return how many rentals changed, or None when there was nothing to do or another caller has this
    interval's listing.
    """
    rentals = list(Rental.objects.filter(credential_id=credential_id, status__in=TRACKED_STATES))
    if not rentals:
        return None
    if not force and not pods_poll_lease(credential_id=credential_id):
        return None
    credential = UpstreamCredential.objects.get(pk=credential_id)
    try:
        pods = upstream.client_for(credential).list_pods()
    except (upstream.UpstreamError, ValueError) as exc:
        logger.warning("Pod listing failed for credential %s: %s", credential_id, exc)
        return 0
    by_cluster: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_pod: dict[str, dict[str, Any]] = {}
    for pod in pods:
        if not isinstance(pod, dict):
            continue
        by_pod[str(pod.get("id"))] = pod
        if pod.get("cluster_id"):
            by_cluster[str(pod["cluster_id"])].append(pod)
    changed = 0
    for rental in rentals:
        rows = by_cluster.get(rental.cluster_id, []) if rental.cluster_id else []
        if not rows and rental.pod_ids:
            rows = [by_pod[pod_id] for pod_id in rental.pod_ids if pod_id in by_pod]
        if _apply_rows(rental, rows):
            changed += 1
    return changed


def _apply_rows(rental: Rental, rows: list[dict[str, Any]]) -> bool:
    """Bring one rental's members and state in line with its pod rows; return whether anything changed."""
    now = timezone.now()
    existing = {member.pod_id: member for member in rental.members.all()}
    seen: set[str] = set()
    touched = False
    with transaction.atomic():
        for row in rows:
            pod_id = str(row.get("id"))
            seen.add(pod_id)
            executor = row.get("executor")
            if not isinstance(executor, dict):
                executor = {}
            status = str(row.get("status") or "")
            values = {
                "rank": _int_or_none(row.get("cluster_node_index")),
                "overlay_ip": str(row.get("cluster_overlay_ip") or ""),
                "status": status,
                "phase": str(row.get("phase") or ""),
                "eta_seconds": _int_or_none(row.get("estimated_ready_seconds")),
                "ssh_command": str(row.get("ssh_connect_cmd") or ""),
                "executor_id": str(executor.get("id") or ""),
                "price_per_hour": _decimal(row.get("price") or 0),
                "gpu_count": _int_or_none(row.get("gpu_count")) or 0,
            }
            member = existing.get(pod_id)
            if member is None:
                member = ClusterMember(rental=rental, pod_id=pod_id, **values)
                if status == "RUNNING":
                    member.running_since = now
                member.save()
                touched = True
                continue
            if any(getattr(member, key) != value for key, value in values.items()) or member.gone_at:
                if status == "RUNNING" and member.running_since is None:
                    member.running_since = now
                for key, value in values.items():
                    setattr(member, key, value)
                member.gone_at = None
                member.save()
                touched = True
        for pod_id, member in existing.items():
            if pod_id not in seen and member.gone_at is None:
                member.gone_at = now
                member.status = member.status if member.status in FAILED_POD_STATUSES else "GONE"
                member.save(update_fields=["gone_at", "status", "updated_at"])
                touched = True
        if rows and not rental.cluster_id and rows[0].get("cluster_id"):
            rental.cluster_id = str(rows[0]["cluster_id"])
            Rental.objects.filter(pk=rental.pk).update(cluster_id=rental.cluster_id)
            touched = True
        moved = _advance_state(rental, rows)
        if touched and not moved:
            rental_touch(rental_id=rental.pk)
    return touched or moved


def _advance_state(rental: Rental, rows: list[dict[str, Any]]) -> bool:
    """Move the rental on when its members say so: ready, degraded, or gone after a terminate."""
    if rental.status == S.TERMINATING:
        if not rows:
            return rental_transition(
                rental_id=rental.pk,
                from_status=S.TERMINATING,
                to_status=S.TERMINATED,
                message="Every member is gone: the cluster was removed.",
            )
        return False
    # Only once we have seen the members can we say anything about them.
    if not rows and rental.status == S.RENTED:
        return False
    failed = [row for row in rows if str(row.get("status")) in FAILED_POD_STATUSES]
    missing = rental.node_count - len(rows) if rental.status != S.RENTED else 0
    if failed or missing > 0:
        if rental.status == S.DEGRADED:
            return False
        names = ", ".join(f"rank {row.get('cluster_node_index')} {row.get('status')}" for row in failed)
        return rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=S.DEGRADED,
            message=(f"A member failed ({names or f'{missing} missing'}). The other members keep running and billing."),
            kind=RentalEvent.Kind.MEMBER,
        )
    all_ready = len(rows) >= rental.node_count and all(
        row.get("status") == "RUNNING" and row.get("ssh_connect_cmd") for row in rows
    )
    if all_ready and rental.status in (S.RENTED, S.DEGRADED):
        return rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=S.READY,
            message="Every member is running and reachable over SSH.",
        )
    return False
