"""Track rented clusters' members from `GET /pods`: one listing per credential serves all its rentals.

The upstream caps pod listings at about 60 a minute per account, so one poller per credential (a lease
on a Heartbeat row) lists pods at most every POD_POLL_MIN_INTERVAL_SECONDS, whatever the number of rentals.

What a listing proves. One that does not parse (`MalformedAnswer`) proves nothing and changes nothing. Rows
of other clusters are ignored. A pod is attached only to the rental whose cluster id it carries; a rental whose
cluster id is not known yet finds its pods by the ids its rent answer named, and takes their cluster id only if
no other rental holds it (`rentals.tracking.holding`; the database refuses a second holder of a cluster or a pod).
A member missing from one listing proves nothing either: its `gone_at` marks when it was first missed, and it
counts as gone only when it is missing again from a listing at least POD_POLL_MIN_INTERVAL_SECONDS later,
with no listing in between that showed it (seeing it clears the mark).
- rented → verifying instead of ready when the customer asked for the fabric check (rentals.verification);
- rented/ready → degraded: a member row of ours is present with a failed status, or a member is gone;
- terminating → terminated: Lium accepted the delete (a DELETE /clusters answer with member rows, recorded
  as an event with `delete_accepted`) and every known member is gone. A rental with no known member is
  settled by the delete alone: DELETE /clusters/{id} answering 404 means no pod carries that id.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import UpstreamCredential
from rentals import upstream
from rentals.enqueue import cluster_delete_enqueue, fabric_check_enqueue, removal_push_enqueue
from rentals.models import ClusterMember, Heartbeat, Rental, RentalEvent
from rentals.ready_time import first_ready_fields
from rentals.removal.schedule import removal_adopt_from_members
from rentals.repair.calls import member_reboot_settled
from rentals.signals import pod_listing_read
from rentals.states import RentalStatus
from rentals.tracking.holding import holder_of
from rentals.tracking.member_events import FAILED_POD_STATUSES, member_events_request
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream.parse_pods import PodRow

logger = logging.getLogger(__name__)

TRACKED_STATES = (
    RentalStatus.RENTED,
    RentalStatus.VERIFYING,
    RentalStatus.CHECK_FAILED,
    RentalStatus.READY,
    RentalStatus.DEGRADED,
    RentalStatus.TERMINATING,
)


def pods_poll_lease(*, credential_id: int) -> bool:
    """Claim this interval's pod listing for the credential; return whether this caller got it."""
    now = timezone.now()
    name = f"pods:{credential_id}"  # the credential's poller: one Heartbeat row each
    Heartbeat.objects.get_or_create(name=name, defaults={"at": now - timedelta(days=1)})
    interval = timedelta(seconds=settings.POD_POLL_MIN_INTERVAL_SECONDS)
    # A conditional UPDATE: of several workers asking at once, exactly one gets this interval's listing.
    return Heartbeat.objects.filter(name=name, at__lte=now - interval).update(at=now) == 1


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
        # Unreachable, refused or unreadable (MalformedAnswer): nothing is concluded from this listing.
        logger.warning("Pod listing failed for credential %s: %s", credential_id, exc)
        if isinstance(exc, upstream.MalformedAnswer):
            # Tracking stops until a listing reads again: an operator must hear of it, not only the log.
            pod_listing_read.send(sender=Rental, credential_id=credential_id, refused=str(exc))
        return 0
    pod_listing_read.send(sender=Rental, credential_id=credential_id, refused="")
    by_cluster: dict[str, list[PodRow]] = defaultdict(list)
    by_pod = {pod.id: pod for pod in pods}
    for pod in pods:
        if pod.cluster_id:
            by_cluster[pod.cluster_id].append(pod)
    changed = 0
    for rental in rentals:
        if _sync_rental_with_pods(rental, _rows_of(rental, by_cluster, by_pod)):
            changed += 1
    return changed


def _rows_of(rental: Rental, by_cluster: dict[str, list[PodRow]], by_pod: dict[str, PodRow]) -> list[PodRow]:
    """Return the listed pods of the rental's cluster, else those its rent answer named by id.

    Pods named by id must carry no cluster id but the rental's own (or one no other rental holds, while its own is
    not known), and be no other rental's members: a pod of another rental's cluster is never attached here.
    """
    rows = by_cluster.get(rental.cluster_id, []) if rental.cluster_id else []
    if rows:
        return rows
    rows = [by_pod[pod_id] for pod_id in rental.pod_ids or [] if pod_id in by_pod]
    carried = {row.cluster_id for row in rows if row.cluster_id}
    own = {rental.cluster_id} if rental.cluster_id else set()
    if rows and (
        len(carried | own) > 1
        or holder_of(cluster_id=next(iter(carried), ""), pod_ids=[row.id for row in rows], other_than=rental.pk)
    ):
        logger.warning("Rental %s: its pods belong to another rental's cluster; not attached.", rental.pk)
        return []
    return rows


def _sync_rental_with_pods(rental: Rental, rows: list[PodRow]) -> bool:
    """Bring one rental's members and state in line with its pod rows; return whether anything changed."""
    now = timezone.now()
    existing = {member.pod_id: member for member in rental.members.all()}
    with transaction.atomic():
        carried = {row.cluster_id for row in rows if row.cluster_id}
        learned = not rental.cluster_id and len(carried) == 1
        if learned and not _learn_cluster_id(rental, carried.pop()):
            return False
        stored = _store_listed_members(rental, rows, existing, now)
        if stored and not existing and rental.removal_scheduled_at is not None:
            # A removal set before the members were known reached none of them (pushes go to members only).
            transaction.on_commit(lambda: removal_push_enqueue(rental.pk))
        missed, gone = _mark_unlisted_members(existing, listed={row.id for row in rows}, now=now)
        touched = stored or missed or learned
        moved = _advance_state(rental, rows, gone=gone, known=len(existing))
        if gone or any(row.status in FAILED_POD_STATUSES for row in rows):
            member_events_request(rental=rental)  # why it failed, fetched by a task
        scheduled = [row.removal_scheduled_at for row in rows if row.removal_scheduled_at is not None]
        touched = removal_adopt_from_members(rental=rental, scheduled=scheduled) or touched
        if touched and not moved:
            rental_touch(rental_id=rental.pk)
    return touched or moved


def _learn_cluster_id(rental: Rental, cluster_id: str) -> bool:
    """Store the cluster id the rental's pods carry; return False when another rental took it meanwhile."""
    try:
        with transaction.atomic():  # a savepoint: the unique constraint refuses a second holder
            Rental.objects.filter(pk=rental.pk, cluster_id="").update(cluster_id=cluster_id)
    except IntegrityError:
        logger.warning("Rental %s: cluster %s belongs to another rental; not attached.", rental.pk, cluster_id)
        return False
    rental.cluster_id = cluster_id
    return True


def _store_listed_members(
    rental: Rental, rows: list[PodRow], existing: dict[str, ClusterMember], now: datetime
) -> bool:
    """Create or update a member for each listed pod; return whether any changed."""
    touched = False
    for row in rows:
        member = existing.get(row.id)
        known_price = member.price_per_hour if member is not None else Decimal(0)
        values = {
            "rank": row.cluster_node_index,
            "overlay_ip": row.overlay_ip,
            "status": row.status,
            "phase": row.phase,
            "eta_seconds": row.eta_seconds,
            "ssh_command": row.ssh_connect_cmd,
            "executor_id": row.executor_id,
            "price_per_hour": row.price if row.price is not None else known_price,
            "gpu_count": row.gpu_count or 0,
            "jupyter_url": row.jupyter_url,
            "ports_mapping": {str(container): host for container, host in row.ports_mapping},
        }
        if member is None:
            inserted, member = _member_insert(rental, row, values, now)
            touched = touched or inserted
            if member is None:
                continue  # stored now, or the pod is another rental's: never attached here
        if any(getattr(member, key) != value for key, value in values.items()) or member.gone_at:
            # A reboot's end goes on the timeline (runs again, or failed); a row from before it proves neither.
            rebooting = member.status == "REBOOT_PENDING" and row.status not in ("REBOOT_PENDING", "")
            if rebooting and not member_reboot_settled(member, row.status, row_updated_at=row.updated_at):
                values["status"] = member.status
            if row.status == "RUNNING" and member.running_since is None:
                member.running_since = running_since(row, now)
            for key, value in values.items():
                setattr(member, key, value)
            member.gone_at = None
            member.save()
            touched = True
    return touched


def running_since(row: PodRow, now: datetime) -> datetime:
    """When a member first listed RUNNING started: its row's `updated_at` (the change to RUNNING, when Lium starts
    billing it), not when this poller happened to look; never later than now."""
    return min(row.updated_at, now) if row.updated_at is not None else now


def _member_insert(
    rental: Rental, row: PodRow, values: dict[str, Any], now: datetime
) -> tuple[bool, ClusterMember | None]:
    """Store a newly listed member; return whether it was stored, and the row another worker stored meanwhile
    (to update).

    Two listings overlap when one takes longer than the poll interval: the other may have stored this member
    after this one read the rental's members. A pod that is another rental's member stays that rental's.
    """
    member = ClusterMember(
        rental=rental, pod_id=row.id, running_since=running_since(row, now) if row.status == "RUNNING" else None
    )
    for key, value in values.items():
        setattr(member, key, value)
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction goes on after a duplicate
            member.save()
    except IntegrityError:
        return False, ClusterMember.objects.filter(rental=rental, pod_id=row.id).first()
    return True, None


def _mark_unlisted_members(
    existing: dict[str, ClusterMember], *, listed: set[str], now: datetime
) -> tuple[bool, list[ClusterMember]]:
    """Note members missing from the listing; return whether any changed, and those now gone."""
    # A member missed since at least this long ago, and missed again now, is gone (two listings apart).
    missed_before = now - timedelta(seconds=settings.POD_POLL_MIN_INTERVAL_SECONDS)
    touched = False
    gone: list[ClusterMember] = []
    for pod_id, member in existing.items():
        if pod_id in listed:
            continue
        if member.gone_at is None:
            # Missed once: proves nothing yet (a listing may glitch); remember when.
            member.gone_at = now
            member.save(update_fields=["gone_at", "updated_at"])
            touched = True
            continue
        if member.gone_at <= missed_before:
            gone.append(member)
            if member.status not in FAILED_POD_STATUSES and member.status != "GONE":
                member.status = "GONE"
                member.save(update_fields=["status", "updated_at"])
                touched = True
    return touched, gone


def _deletion_accepted(rental: Rental) -> bool:
    """Return whether Lium accepted a removal of this rental's cluster (recorded by
    `rentals.removal.deletion.rental_delete_cluster`)."""
    return RentalEvent.objects.filter(
        rental_id=rental.pk, kind=RentalEvent.Kind.MEMBER, data__delete_accepted=True
    ).exists()


def _removal_due(rental: Rental) -> bool:
    """Return whether the rental's scheduled removal time has come (and its cluster can be named)."""
    at = rental.removal_scheduled_at
    return at is not None and at <= timezone.now() and bool(rental.cluster_id)


def _remove_as_scheduled(rental: Rental) -> bool:
    """Move a rental whose removal time has come to `terminating`: Lium removes the members itself, and the
    DELETE that follows (idempotent) makes sure of it, so the rental ends as terminated, never as degraded."""
    at = rental.removal_scheduled_at
    moved = rental_transition(
        rental_id=rental.pk,
        from_status=rental.status,
        to_status=RentalStatus.TERMINATING,
        message=f"The scheduled removal time ({at:%Y-%m-%d %H:%M} UTC) has come: removing the cluster.",
    )
    if moved:
        transaction.on_commit(lambda: cluster_delete_enqueue(rental.pk))
    return moved


def _advance_state(rental: Rental, rows: list[PodRow], *, gone: list[ClusterMember], known: int) -> bool:
    """Move the rental on when its members prove it: ready, degraded, or terminated after an accepted delete."""
    if rental.status == RentalStatus.TERMINATING:
        every_member_gone = known > 0 and not rows and len(gone) == known
        if every_member_gone and _deletion_accepted(rental):
            return rental_transition(
                rental_id=rental.pk,
                from_status=RentalStatus.TERMINATING,
                to_status=RentalStatus.TERMINATED,
                message="Lium accepted the removal and no member is listed any more: the cluster was removed.",
            )
        return False
    if _removal_due(rental):
        return _remove_as_scheduled(rental)
    failed = [row for row in rows if row.status in FAILED_POD_STATUSES]
    if failed or gone:
        if rental.status == RentalStatus.DEGRADED:
            return False
        names = ", ".join(f"rank {row.cluster_node_index} {row.status}" for row in failed)
        what = names or (f"{len(gone)} no longer listed" if rows else "every member is no longer listed")
        return rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=RentalStatus.DEGRADED,
            message=f"A member failed ({what}). The other members keep running and billing.",
            kind=RentalEvent.Kind.MEMBER,
        )
    all_ready = len(rows) >= rental.node_count and all(row.status == "RUNNING" and row.ssh_connect_cmd for row in rows)
    if all_ready and rental.status == RentalStatus.RENTED and rental.verify_fabric:
        return _verifying_start(rental)
    if all_ready and rental.status in (RentalStatus.RENTED, RentalStatus.DEGRADED):
        return rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=RentalStatus.READY,
            message="Every member is running and reachable over SSH.",
            **first_ready_fields(rental),
        )
    return False


def _verifying_start(rental: Rental) -> bool:
    """Move a verified rental whose members all run to `verifying` and enqueue its check (its own queue)."""
    moved = rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.RENTED,
        to_status=RentalStatus.VERIFYING,
        message="Every member is running: measuring the fabric before handing the cluster over.",
    )
    if moved:
        transaction.on_commit(lambda: fabric_check_enqueue(rental.pk))
    return moved
