"""The fabric check's row: created with the rental (same transaction), read by the API, the page and the worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accounts.crypto import secret_encrypt
from rentals.fabric_check.keys import CheckKey
from rentals.models import FabricCheck, Rental

# A fabric whose offer states no link rate is held to the slowest rate Lium lists (our choice; README).
UNSTATED_LINK_RATE_GBPS = 100.0

# What the API says of the check: running until it ended, then passed or failed (could not measure is failed).
API_STATUS = {
    FabricCheck.Status.PENDING: "running",
    FabricCheck.Status.RUNNING: "running",
    FabricCheck.Status.PASSED: "passed",
    FabricCheck.Status.FAILED: "failed",
    FabricCheck.Status.ERROR: "failed",
}


@dataclass(frozen=True)
class CheckPlan:
    """A verified order's check: its key pair (the public line is in the order) and the fabric's link rate."""

    key: CheckKey
    link_rate_gbps: float


def fabric_check_create(*, rental: Rental, plan: CheckPlan) -> FabricCheck:
    """Store the check of a rental being submitted: the private key only encrypted."""
    Rental.objects.filter(pk=rental.pk).update(verify_fabric=True)
    rental.verify_fabric = True
    return FabricCheck.objects.create(
        rental=rental,
        public_key_line=plan.key.public_line,
        private_key_encrypted=secret_encrypt(plan.key.private_pem),
        link_rate_gbps=plan.link_rate_gbps,
    )


def fabric_check_of(rental: Rental) -> FabricCheck | None:
    """Return the rental's check, or None for a rental that did not opt in."""
    if not rental.verify_fabric:
        return None
    try:
        return rental.fabric_check
    except FabricCheck.DoesNotExist:
        return None


def slow_members_of(check: FabricCheck) -> list[dict[str, Any]]:
    """Return the slow members by rank, with their executor and pod where the rental still knows them."""
    members = {member.rank: member for member in check.rental.members.all()}
    named = []
    for rank in check.slow_ranks:
        member = members.get(rank)
        named.append(
            {
                "rank": rank,
                "executor_id": member.executor_id if member else "",
                "pod_id": member.pod_id if member else "",
            }
        )
    return named


def fabric_check_dict(rental: Rental) -> dict[str, Any] | None:
    """Return the API's `fabric_check` (null when the rental did not opt in)."""
    check = fabric_check_of(rental)
    if check is None:
        return None
    return {
        "status": API_STATUS[FabricCheck.Status(check.status)],
        "bus_bandwidth_gbps": check.bus_bandwidth_gbps,
        "floor_gbps": check.floor_gbps,
        "slow_members": slow_members_of(check),
        "pairs": check.pairs,
        "error": check.error,
        "kept_unverified": check.kept_unverified,
        "keys_removed": check.keys_removed,
    }


def check_unsettled(rental: Rental) -> bool:
    """Return whether a verified rental's check ended without passing and the customer did not keep it anyway (a
    check that never ran says nothing about the fabric)."""
    check = fabric_check_of(rental)
    if check is None or check.finished_at is None:  # none, or discarded unused (never connected)
        return False
    return check.status in (FabricCheck.Status.FAILED, FabricCheck.Status.ERROR) and not check.kept_unverified
