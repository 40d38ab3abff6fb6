"""Pick the cheapest nodes that fit a preset or a watch, on one fabric, from the shared offers cache.

`preset_nodes_pick` is what the fabric page, "Rent again" and a scheduled rental use; `nodes_pick` is the rule,
on a listing already read (a watch scan reads each credential's listing once for all its watches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from presets.wants import NodePick, NodeWant
from rentals import offers, selectors
from rentals.fabric_check.parse import link_rate_parse
from rentals.offers import OfferListing
from rentals.upstream import UpstreamError
from rentals.upstream.parse_offers import Fabric, Node

if TYPE_CHECKING:
    from presets.models import Preset
    from rentals.models import Rental


def preset_nodes_pick(preset: Preset, offers: OfferListing | None = None) -> tuple[NodePick | None, str]:
    """Return the cheapest nodes on one fabric that fit the preset, or (None, why not) in a customer's words.

    `offers` None reads the listing of the preset's customer's credential (cached, `rentals.offers.offers_get`).
    """
    listing = offers
    if listing is None:
        listing, reason = listing_for_customer(preset.customer)
        if listing is None:
            return None, reason
    return nodes_pick(preset.want, listing)


def scheduled_nodes_receiver(
    sender: object, *, rental: Rental, listing: OfferListing, **kwargs: object
) -> tuple[str, list[str]] | str | None:
    """Answer `rentals.signals.scheduled_nodes_picking`: the preset's cheapest fitting nodes now, or why none.

    Only the rental's own customer's preset counts (the id came with the order)."""
    from presets.models import Preset

    if rental.preset_id is None:
        return None
    preset = Preset.objects.filter(pk=rental.preset_id, customer_id=rental.customer_id).first()
    if preset is None:
        return "Its preset was deleted."
    pick, reason = preset_nodes_pick(preset, offers=listing)
    if pick is None:
        return reason
    return pick.fabric.fabric_id, pick.executor_ids


def listing_for_customer(customer: object, *, refresh: bool = False) -> tuple[OfferListing | None, str]:
    """Return the customer's offers (cached; `refresh`: read anew), or (None, why they cannot be read now)."""
    credential = selectors.customer_credential(customer)  # type: ignore[arg-type]
    if credential is None:
        return None, "This customer has no active Lium credential; ask an operator to set one."
    try:
        return offers.offers_get(credential=credential, refresh=refresh), ""
    except (UpstreamError, ValueError) as exc:
        return None, f"The Lium API could not list the fabrics right now ({exc}). Try again in a moment."


def nodes_pick(want: NodeWant, listing: OfferListing) -> tuple[NodePick | None, str]:
    """Return the fabric and nodes that cost least in total for `want` (ties: the fabric id), or (None, why)."""
    best: NodePick | None = None
    most = 0
    for fabric in listing.fabrics:
        fitting = _fitting_nodes(want, fabric)
        most = max(most, len(fitting))
        if len(fitting) < want.node_count:
            continue
        pick = NodePick(fabric=fabric, nodes=fitting[: want.node_count])
        if best is None or (pick.price_per_hour, fabric.fabric_id) < (best.price_per_hour, best.fabric.fabric_id):
            best = pick
    if best is not None:
        return best, ""
    return None, f"No fabric offers {want.describe()} now (the most that fit on one fabric: {most})."


def _fitting_nodes(want: NodeWant, fabric: Fabric) -> list[Node]:
    """Return the fabric's whole free nodes that fit the want, cheapest first (then by id, as the CLI picks)."""
    if want.fabric_type and fabric.fabric_type != want.fabric_type:
        return []
    if want.min_link_rate_gbps and (link_rate_parse(fabric.link_rate) or 0) < want.min_link_rate_gbps:
        return []
    gpu = want.gpu_type.casefold()
    fitting = [
        node
        for node in fabric.nodes
        if node.whole
        and (not gpu or gpu in node.machine_name.casefold())
        and (want.max_price_per_node_hour is None or node.price_per_hour <= want.max_price_per_node_hour)
    ]
    return sorted(fitting, key=lambda node: (node.price_per_hour, node.id))
