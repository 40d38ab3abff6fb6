"""`{{ member|start_progress }}` and `{{ seconds|ready_in }}`: time to ready in the official client's words."""

from __future__ import annotations

from django import template

from rentals.estimates import duration_text
from rentals.models import ClusterMember

register = template.Library()
register.filter("ready_in", duration_text)  # "~18 s", "~2 min" from 90 s, "any moment now" at 0, "" when unknown

STARTING = ("PENDING", "REBOOT_PENDING")  # Lium sends phase and estimate only in these states (upstream-api.md §8)


@register.filter
def start_progress(member: ClusterMember) -> str:
    """Say how a starting member is doing, as `lium ps` does: "est. ready in ~18 s (phase: pulling image)"."""
    if member.status not in STARTING:
        return ""
    phase = f"phase: {member.phase}" if member.phase else ""
    if member.eta_seconds is None:
        return phase
    eta = duration_text(member.eta_seconds)
    eta = eta if eta == "any moment now" else f"est. ready in {eta}"
    return f"{eta} ({phase})" if phase else eta
