"""Open the rent form from a preset or from a past rental ("Rent again"): which nodes, and the form's values."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from presets.matching import listing_for_customer, nodes_pick, preset_nodes_pick
from presets.models import Preset
from presets.wants import NodeWant
from rentals.fabric_check.keys import KEY_COMMENT
from rentals.models import Rental
from rentals.offers import OfferListing


@dataclass(frozen=True)
class RentStart:
    """Where the rent form opens (a fabric) and what it is filled in with; `fabric_id` None: why not, in `note`."""

    fabric_id: str | None
    initial: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def preset_start(preset: Preset) -> RentStart:
    """The rent form for a preset: its cheapest matching nodes on one fabric, and its fields."""
    pick, reason = preset_nodes_pick(preset)
    if pick is None:
        return RentStart(None, note=reason)
    initial = {
        "executor_ids": pick.executor_ids,
        "pod_name": preset.pod_name,
        "template_id": preset.template_id or None,
        "initial_port_count": preset.initial_port_count,
        "termination_hours": preset.termination_hours,
        "enable_jupyter": preset.enable_jupyter,
        "ssh_public_keys": preset.ssh_public_keys,
        "preset_id": preset.pk,  # a scheduled start picks this preset's nodes again at its time
    }
    note = (
        f"From preset '{preset.name}': the {len(pick.nodes)} cheapest matching nodes, ${pick.price_per_hour:.2f}/hour."
    )
    return RentStart(pick.fabric.fabric_id, {name: value for name, value in initial.items() if value is not None}, note)


def rental_start(rental: Rental) -> RentStart:
    """The rent form for a past rental: its nodes if all are still free, else the cheapest of its kind, saying so."""
    listing, reason = listing_for_customer(rental.customer)
    if listing is None:
        return RentStart(None, note=reason)
    initial = _order_fields(rental)
    wanted = list(rental.executor_ids or [])
    ended_after_listing = rental.is_final and listing.fetched_at < rental.updated_at.timestamp()
    if wanted and ended_after_listing and not _all_free(listing, rental.fabric_id, wanted):
        # Listed while the rental still held its nodes: ask Lium once more (the listing it caches is newer, so
        # other clicks do not). If Lium cannot answer now, the cached listing still gives the cheapest free nodes.
        listing = listing_for_customer(rental.customer, refresh=True)[0] or listing
    if wanted and _all_free(listing, rental.fabric_id, wanted):
        note = f"Renting again the same {len(wanted)} nodes as rental {str(rental.public_id)[:8]}."
        return RentStart(rental.fabric_id, {**initial, "executor_ids": wanted}, note)
    want = NodeWant(node_count=max(2, len(wanted)), gpu_type=rental.gpu_type)
    pick, reason = nodes_pick(want, listing)
    if pick is None:
        return RentStart(None, note=f"Its nodes are no longer free, and {reason[0].lower()}{reason[1:]}")
    note = (
        f"Its nodes are no longer all free: picked the {len(pick.nodes)} cheapest free {pick.gpu_type} nodes "
        f"on fabric {pick.fabric.fabric_id} instead (${pick.price_per_hour:.2f}/hour)."
    )
    return RentStart(pick.fabric.fabric_id, {**initial, "executor_ids": pick.executor_ids}, note)


def _all_free(listing: OfferListing, fabric_id: str, node_ids: list[str]) -> bool:
    fabric = listing.fabric(fabric_id)
    return fabric is not None and {node.id for node in fabric.nodes if node.whole}.issuperset(node_ids)


def _order_fields(rental: Rental) -> dict[str, Any]:
    """Read the rent form's fields back from the rental's stored request body (never the fabric check's key)."""
    try:
        body = json.loads(bytes(rental.request_body))
    except (TypeError, ValueError):
        body = {}
    body = body if isinstance(body, dict) else {}
    keys = [key for key in body.get("user_public_key") or [] if isinstance(key, str) and KEY_COMMENT not in key]
    initial: dict[str, Any] = {
        "pod_name": rental.pod_name,
        "ssh_public_keys": "\n".join(keys),
        "enable_jupyter": body.get("enable_jupyter") is True,
        "enable_volume_encryption": body.get("enable_volume_encryption") is not False,
        "enable_backups": body.get("enable_backups") is not False,
        "verify_fabric": rental.verify_fabric,
    }
    for name in ("template_id", "initial_port_count", "termination_hours"):
        if body.get(name) is not None:
            initial[name] = body[name]
    return initial
