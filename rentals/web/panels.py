"""The rental page's lifecycle panels: removal, connect, why members failed, and what a terminate did.

Built with the progress section (`rentals.web.progress.progress_context`) from the members it already read, so
they cost at most one more query (a terminate's result, only while terminating or after).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rentals.connect import env_ranks, interconnect_check, member_access, ssh_config
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.repair.services import repairs_recent
from rentals.states import HOLDS_CLUSTER_STATES, RentalStatus
from rentals.tracking.member_events import EVENTS_WANTED_STATUSES
from rentals.verification.records import fabric_check_of, slow_members_of

EVENTS_SHOWN = 10  # per member: the newest, which say why


def panels_context(rental: Rental, *, all_members: Sequence[ClusterMember], live: Sequence[ClusterMember]) -> dict:
    """Return what the lifecycle panels show (the same for every viewer)."""
    return {
        "access": member_access(live),
        "has_ssh_config": bool(ssh_config(rental.pod_name, live)),
        "env_ranks": env_ranks(live),
        "interconnect_check": interconnect_check(live, gpus_per_node=rental.gpus_per_node),
        "member_problems": member_problems(all_members),
        "terminate_results": terminate_results(rental, all_members),
        # Member repair (rentals.repair): the buttons while the cluster is held, the requests and their results.
        "repairable": rental.status in HOLDS_CLUSTER_STATES,
        "repairs": repairs_recent(rental) if all_members else [],
        **fabric_check_panel(rental),
    }


def fabric_check_panel(rental: Rental) -> dict[str, Any]:
    """Return a verified rental's check, its slow members (by rank, executor and pod) and every connection and
    command it made on the members (the audit on the timeline), each command shown by its first line."""
    check = fabric_check_of(rental)
    if check is None:
        return {"fabric_check": None, "fabric_check_slow": [], "fabric_check_audit": []}
    event = rental.events.filter(data__has_key="fabric_check_audit").order_by("-id").first()
    audit = [
        {**entry, "detail": str(entry.get("detail", "")).splitlines()[0] if entry.get("detail") else ""}
        for entry in (event.data["fabric_check_audit"] if event else [])
    ]
    return {"fabric_check": check, "fabric_check_slow": slow_members_of(check), "fabric_check_audit": audit}


def member_problems(members: Sequence[ClusterMember]) -> list[dict[str, Any]]:
    """Return the failed or gone members with the upstream's newest events about them, by rank."""
    failed = [member for member in members if member.status in EVENTS_WANTED_STATUSES or member.events]
    return [
        {
            "rank": member.rank,
            "pod_id": member.pod_id,
            "status": member.status,
            "events": [event for event in member.events if isinstance(event, dict)][-EVENTS_SHOWN:],
            "asked": member.events_fetched_at is not None,
        }
        for member in sorted(failed, key=lambda member: (member.rank is None, member.rank))
    ]


def terminate_results(rental: Rental, members: Sequence[ClusterMember]) -> list[dict[str, Any]]:
    """Return each member's result from the newest accepted `DELETE /clusters/{id}` ([] before one)."""
    if rental.status not in (RentalStatus.TERMINATING, RentalStatus.TERMINATED):
        return []
    accepted = (
        RentalEvent.objects.filter(rental_id=rental.pk, kind=RentalEvent.Kind.MEMBER, data__delete_accepted=True)
        .order_by("-at", "-id")
        .first()
    )
    if accepted is None:
        return []
    ranks = {member.pod_id: member.rank for member in members}
    rows = [row for row in accepted.data.get("pods", []) if isinstance(row, dict)]
    return [
        {
            "rank": ranks.get(str(row.get("pod_id"))),
            "pod_id": str(row.get("pod_id", "")),
            "success": row.get("success") is True,
            "message": str(row.get("message") or ""),
            "at": accepted.at,
        }
        for row in rows
    ]
