"""The fabric check worker's step (queue `fabric_check`): claim the check, run it over SSH, destroy the key, record
what it found on the timeline, then move the rental from `verifying` to `ready` or `check_failed`.

A rental that left `verifying` before its check ran (a member failed, the customer terminated) is never connected to:
its key is destroyed unused. A check whose worker died is taken over after FABRIC_CHECK_STALE_SECONDS.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.crypto import secret_decrypt
from common.db_outage import through_outage
from rentals.fabric_check.runner import FabricCheckResult, Limits, Member, fabric_check_run_sync
from rentals.models import ClusterMember, FabricCheck, Rental, RentalEvent
from rentals.ready_time import first_ready_fields
from rentals.states import RentalStatus
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream.parse import ssh_parts

logger = logging.getLogger(__name__)
S = FabricCheck.Status
RECORD_THROUGH_OUTAGE_SECONDS = 120.0


def fabric_check_claim(*, rental_id: int) -> bool:
    """Take the rental's check (pending, or running but abandoned); return whether this caller got it."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.FABRIC_CHECK_STALE_SECONDS)
    claimable = Q(status=S.PENDING) | Q(status=S.RUNNING, started_at__lt=stale)
    checks = FabricCheck.objects.filter(claimable, rental_id=rental_id, rental__status=RentalStatus.VERIFYING)
    claimed = checks.exclude(private_key_encrypted="").update(status=S.RUNNING, started_at=now) == 1
    if claimed:
        rental_touch(rental_id=rental_id)  # the page's cached section shows the check running
    return claimed


def fabric_check_perform(*, rental_id: int) -> str:
    """Run the rental's check if it is due; return what happened (for the task's log)."""
    if not fabric_check_claim(rental_id=rental_id):
        fabric_check_discard(rental_id=rental_id)
        return "nothing to check"
    check = FabricCheck.objects.select_related("rental").get(rental_id=rental_id)
    rental = check.rental
    members = _members_of(rental)
    if members is None:
        return _record(check, None, error="a member has no SSH address or overlay IP yet")
    try:
        result = fabric_check_run_sync(
            members,
            private_key_pem=secret_decrypt(check.private_key_encrypted),
            public_key_line=check.public_key_line,
            link_rate_gbps=check.link_rate_gbps,
            gpus_per_node=rental.gpus_per_node or 1,
            limits=Limits(allreduce=settings.FABRIC_CHECK_ALLREDUCE_SECONDS),
        )
    except ValueError as exc:  # members the check refuses (fewer than two, a bad overlay IP) or a key no key opens
        return _record(check, None, error=str(exc))
    # The key is gone from the members now: a check run again could not log in. Write through a database restart
    # or failover (two minutes at most), and never past shortly before another worker may take the check over.
    takeover = (check.started_at or timezone.now()) + timedelta(seconds=settings.FABRIC_CHECK_STALE_SECONDS * 0.9)
    seconds = min(RECORD_THROUGH_OUTAGE_SECONDS, max(0.0, (takeover - timezone.now()).total_seconds()))
    return through_outage(lambda: _record(check, result), seconds=seconds)


# States in which a pending check may still run: the order is on its way, or its members are starting.
WAITING_STATES = (
    RentalStatus.QUEUED,
    RentalStatus.SENDING,
    RentalStatus.RETRYING,
    RentalStatus.UNKNOWN,
    RentalStatus.RENTED,
    RentalStatus.VERIFYING,
)


def fabric_check_discard(*, rental_id: int | None = None) -> int:
    """Destroy the unused keys of rentals that left the way to `verifying` (never connected to); return how many.

    A member failed first (degraded), the customer terminated, or the order was refused: the check will not run.
    """
    gone = FabricCheck.objects.filter(status=S.PENDING).exclude(rental__status__in=WAITING_STATES)
    if rental_id is not None:
        gone = gone.filter(rental_id=rental_id)
    return gone.update(private_key_encrypted="", status=S.ERROR, error="Not run: the rental was no longer verifying.")


def fabric_check_lost() -> list[int]:
    """Return verifying rentals whose check message was lost or whose worker died (the sweeper enqueues them)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.FABRIC_CHECK_STALE_SECONDS)
    overdue = now - timedelta(seconds=max(2 * settings.SWEEP_INTERVAL_SECONDS, 5))
    lost = Q(fabric_check__status=S.PENDING, updated_at__lte=overdue) | Q(
        fabric_check__status=S.RUNNING, fabric_check__started_at__lt=stale
    )
    rows = Rental.objects.filter(lost, status=RentalStatus.VERIFYING)
    return list(rows.values_list("pk", flat=True)[:100])


def _members_of(rental: Rental) -> list[Member] | None:
    """Return the live members as the check reaches them, or None when one is not reachable yet."""
    members = []
    for member in ClusterMember.objects.filter(rental=rental, gone_at__isnull=True).order_by("rank"):
        parts = ssh_parts(member.ssh_command)
        if parts is None or member.rank is None or not member.overlay_ip:
            return None
        user, host, port = parts
        members.append(Member(member.rank, member.overlay_ip, host, port, user))
    return members


def _record(check: FabricCheck, result: FabricCheckResult | None, *, error: str = "") -> str:
    """Destroy the key, store the figures, audit the sessions and move the rental on; return the outcome."""
    status = result.status if result is not None else S.ERROR
    with transaction.atomic():
        FabricCheck.objects.filter(pk=check.pk).update(
            status=status,
            private_key_encrypted="",
            floor_gbps=result.floor_gbps if result else None,
            bus_bandwidth_gbps=result.bus_bandwidth_gbps if result else None,
            pairs=result.as_record()["pairs"] if result else [],
            slow_ranks=list(result.slow_members) if result else [],
            error=result.error if result else error,
            keys_removed=_all_removed(result),
            finished_at=timezone.now(),
        )
        if result is not None:
            _audit(check.rental_id, result)
        _move_on(check.rental, status, result, error)
    return status


def _all_removed(result: FabricCheckResult | None) -> bool | None:
    if result is None:
        return None  # never connected: nothing to remove
    return bool(result.key_removed) and all(result.key_removed.values())


def _audit(rental_id: int, result: FabricCheckResult) -> None:
    """Put every connection and command on the timeline, then say where the key was removed."""
    RentalEvent.objects.create(
        rental_id=rental_id,
        kind=RentalEvent.Kind.MEMBER,
        message=f"Fabric check: {len(result.audit)} connections and commands on the members (listed on the rental's "
        "fabric check panel).",
        data={"fabric_check_audit": result.as_record()["audit"]},
    )
    kept = sorted(rank for rank, removed in result.key_removed.items() if not removed)
    message = (
        "The check's key was removed from every member's authorized keys."
        if not kept
        else f"The check's key could not be removed from member rank(s) {', '.join(map(str, kept))}: remove the "
        "line ending in lium-dashboard-check from ~/.ssh/authorized_keys there."
    )
    RentalEvent.objects.create(
        rental_id=rental_id,
        kind=RentalEvent.Kind.MEMBER,
        message=message,
        data={"fabric_check_key_removed": result.as_record()["key_removed"]},
    )


def _move_on(rental: Rental, status: str, result: FabricCheckResult | None, error: str) -> None:
    data: dict[str, Any] = {"fabric_check": status}
    if status == S.PASSED and result is not None:
        message = (
            f"Fabric check passed: bus bandwidth {result.bus_bandwidth_gbps:.0f} Gb/s "
            f"(floor {result.floor_gbps:.0f} Gb/s). The cluster is ready."
        )
        fields = first_ready_fields(rental)  # its time to ready includes the check
        to_status = RentalStatus.READY
    else:
        to_status, fields = RentalStatus.CHECK_FAILED, {}
        message = _failed_message(result, error)
    rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.VERIFYING,
        to_status=to_status,
        message=message,
        data=data,
        **fields,
    )


def _failed_message(result: FabricCheckResult | None, error: str) -> str:
    if result is None or result.status == S.ERROR:
        return f"The fabric check could not measure: {result.error if result else error}"
    slow = ", ".join(f"rank {rank}" for rank in result.slow_members)
    return (
        f"Fabric check failed: bus bandwidth {result.bus_bandwidth_gbps:.0f} Gb/s is under the floor of "
        f"{result.floor_gbps:.0f} Gb/s. Slow member(s): {slow}."
    )
