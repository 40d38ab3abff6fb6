"""A cluster order: what the customer asks for, built from checked input and the offers it was chosen from.

`rental_order_build` prices, defaults and checks an order against the offers; the order service
(`rentals.orders.service`), which the rent form and the JSON API both call, is its one caller in the product.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from accounts.models import Customer
from rentals.offers import OfferListing, Template, node_selection_check
from rentals.removal.policy import removal_policy_apply
from rentals.upstream.parse_offers import Fabric


@dataclass(frozen=True)
class RentOrder:
    """What the customer asked for; becomes the request body, serialised once."""

    fabric_id: str
    executor_ids: list[str]
    pod_name: str
    public_keys: list[str]
    template_id: str | None = None
    initial_port_count: int | None = None
    termination_hours: int | None = None
    enable_jupyter: bool = False
    enable_volume_encryption: bool = True
    enable_backups: bool = True
    # The seed's remaining optional fields, sent only when set.
    advanced: dict[str, Any] = field(default_factory=dict)
    gpu_type: str = ""
    gpus_per_node: int = 0
    price_per_hour: Decimal = Decimal(0)


# The order's options beside its nodes, keys and template, named as the rent form and the API name them.
OPTIONS = ("initial_port_count", "termination_hours", "enable_jupyter", "enable_volume_encryption", "enable_backups")
ADVANCED_FIELDS = ("volume_id", "backup_log_id", "restore_path", "skip_add_agent_ssh_key", "ncu_profiling")


def rental_order_build(
    *,
    fabric: Fabric,
    listing: OfferListing,
    templates: list[Template],
    executor_ids: list[str] | None = None,
    node_count: int | None = None,
    template_id: str | None = None,
    customer: Customer | None = None,
    **choices: Any,
) -> RentOrder:
    """Return the order for these nodes of `fabric`, priced and with the newest template unless one is named.

    `fabric`, `listing` and `templates` are what the chosen customer's credential offers now; the nodes are
    `executor_ids`, or the `node_count` cheapest whole free ones. `choices` are the order's remaining fields
    (pod name, keys, options). With `customer`, its removal policy fills in or caps `termination_hours`.
    Raise ValidationError keyed by the field at fault: executor_ids, node_count, template_id or termination_hours.
    """
    if customer is not None:
        choices["termination_hours"] = removal_policy_apply(customer=customer, hours=choices.get("termination_hours"))
    if node_count is not None:
        chosen = [node.id for node in fabric.cheapest(node_count)]
        if len(chosen) < node_count:
            message = f"This fabric has only {len(chosen)} whole free node(s)."
            raise ValidationError({"node_count": ValidationError(message, code="not_enough_nodes")})
    else:
        chosen = list(executor_ids or [])
    try:
        node_selection_check(chosen=chosen, fabric=fabric, listing=listing)
    except ValidationError as exc:
        raise ValidationError({"executor_ids": exc}) from exc
    if template_id and template_id not in {template.id for template in templates}:
        message = "Not a cluster template; leave it out for the newest."
        raise ValidationError({"template_id": ValidationError(message, code="unknown_template")})
    nodes = {node.id: node for node in fabric.nodes}
    picked = [nodes[node_id] for node_id in chosen]
    return RentOrder(
        fabric_id=fabric.fabric_id,
        executor_ids=chosen,
        template_id=template_id or (templates[0].id if templates else None),
        gpu_type=picked[0].machine_name,
        gpus_per_node=picked[0].gpu_count,
        # What the hourly quota adds up: the order's price per hour, all nodes together.
        price_per_hour=sum((node.price_per_hour for node in picked), Decimal(0)),
        **choices,
    )


def request_body_with_nodes(body: bytes, executor_ids: list[str]) -> bytes:
    """Return a stored body with other nodes (a scheduled preset's, picked at its time), serialised the same way."""
    fields = json.loads(body)
    fields["executor_uuids"] = list(executor_ids)
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def request_body_build(order: RentOrder) -> bytes:
    """Serialise the order once, deterministically; these exact bytes are sent on every attempt."""
    body: dict[str, Any] = {
        "pod_name": order.pod_name,
        "executor_uuids": list(order.executor_ids),
        "user_public_key": list(order.public_keys),
        "enable_volume_encryption": order.enable_volume_encryption,
        "enable_backups": order.enable_backups,
        "enable_jupyter": order.enable_jupyter,
    }
    if order.template_id:
        body["template_id"] = order.template_id
    if order.initial_port_count is not None:
        body["initial_port_count"] = order.initial_port_count
    if order.termination_hours is not None:
        body["termination_hours"] = order.termination_hours
    for name in ADVANCED_FIELDS:
        value = order.advanced.get(name)
        if value not in (None, ""):
            body[name] = value
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
