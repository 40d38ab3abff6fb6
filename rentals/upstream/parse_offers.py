"""Turn the Lium API's offer and template listings into typed values (`Fabric`, `Node`, `TemplateRow`).

Checked like every answer (`rentals.upstream.parse`): an id that does not fit its column is refused or
dropped, never cut; what cannot be read raises `Unparseable`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from rentals.upstream.parse import (
    EXECUTOR_ID_MAX,
    FABRIC_ID_MAX,
    SHORT_TEXT_MAX,
    count,
    ident,
    ipv4,
    json_list,
    price,
    text,
)

# --- Offers and templates ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One free node (a whole executor) of a fabric."""

    id: str
    machine_name: str
    gpu_count: int
    price_per_gpu: Decimal
    location: str
    country_code: str
    reliability_score: float | None
    max_cuda_version: str
    nvlink: bool
    gpu_power_limited: bool
    last_verified_at: str
    ip: str
    available_gpu_count: int | None = None

    @property
    def price_per_hour(self) -> Decimal:
        return self.price_per_gpu * self.gpu_count

    @property
    def whole(self) -> bool:
        """Whether every GPU of the host is free: a cluster rents whole nodes only."""
        return self.available_gpu_count is None or self.available_gpu_count >= self.gpu_count


@dataclass(frozen=True)
class Fabric:
    """A fabric offer: free nodes on one RDMA fabric."""

    fabric_id: str
    fabric_type: str
    link_rate: str
    measured: bool
    node_count: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def free_count(self) -> int:
        return len(self.nodes)

    @property
    def gpu_type(self) -> str:
        return self.nodes[0].machine_name if self.nodes else ""

    @property
    def gpus_per_node(self) -> int:
        return self.nodes[0].gpu_count if self.nodes else 0

    @cached_property  # read four times per fabric on the fabrics page (sort, filter, row): once per listing
    def cheapest_node_hour(self) -> Decimal | None:
        return min((node.price_per_hour for node in self.nodes), default=None)

    def cheapest(self, count: int) -> list[Node]:
        """Return the `count` cheapest nodes, by price then id (as the official CLI picks them)."""
        whole = [node for node in self.nodes if node.whole]
        return sorted(whole, key=lambda node: (node.price_per_hour, node.id))[:count]


def node_parse(row: dict[str, Any]) -> Node | None:
    """Read one node; None when its id could not be stored (it then cannot be offered)."""
    node_id = ident(row.get("id"), EXECUTOR_ID_MAX)
    if node_id is None:
        return None
    location = row.get("location")
    if not isinstance(location, dict):
        location = {}
    score = row.get("reliability_score")
    where = ", ".join(text(part, 100) for part in (location.get("city"), location.get("country")) if part)
    return Node(
        id=node_id,
        machine_name=text(row.get("machine_name") or "", 100),
        gpu_count=count(row.get("gpu_count"), 1024) or 0,
        price_per_gpu=price(row.get("price_per_gpu")) or Decimal(0),
        location=where,
        country_code=text(location.get("country_code") or "", 8),
        reliability_score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        max_cuda_version=text(row.get("max_cuda_version") or "", 32),
        nvlink=row.get("nvlink") is True,
        gpu_power_limited=row.get("gpu_power_limited") is True,
        last_verified_at=text(row.get("last_verified_at") or "", 64),
        ip=ipv4(row.get("executor_ip_address")),
        available_gpu_count=count(row.get("available_gpu_count"), 1024),
    )


def offer_parse(row: dict[str, Any]) -> Fabric | None:
    """Read one fabric offer; None when its id could not be stored."""
    fabric_id = ident(row.get("fabric_id"), FABRIC_ID_MAX)
    if fabric_id is None:
        return None
    raw_nodes = row.get("nodes")
    parsed = (node_parse(raw) for raw in (raw_nodes if isinstance(raw_nodes, list) else []) if isinstance(raw, dict))
    nodes = [node for node in parsed if node is not None]
    fabric_type = row.get("fabric_type")
    return Fabric(
        fabric_id=fabric_id,
        fabric_type=fabric_type if fabric_type in ("infiniband", "roce") else "infiniband",
        link_rate=text(row.get("link_rate") or "", 100),
        measured=row.get("fabric_measured") is True,
        node_count=count(row.get("node_count")) or len(nodes),
        nodes=nodes,
    )


def offer_listing(body: Any) -> list[Fabric]:
    """Read `GET /executors/infiniband-clusters`; rows that cannot be offered are left out."""
    rows = json_list(body, "The offer listing")
    return [fabric for fabric in (offer_parse(row) for row in rows if isinstance(row, dict)) if fabric is not None]


@dataclass(frozen=True)
class TemplateRow:
    id: str
    name: str
    docker_image: str
    docker_image_tag: str


def template_listing(body: Any) -> list[TemplateRow]:
    """Read `GET /templates`; a row without a usable id or image is left out."""
    templates = []
    for row in json_list(body, "The template listing"):
        if not isinstance(row, dict):
            continue
        template_id = ident(row.get("id"), 100)
        image = ident(row.get("docker_image"), SHORT_TEXT_MAX)
        if template_id is None or image is None:
            continue
        templates.append(
            TemplateRow(
                id=template_id,
                name=text(row.get("name") or "", SHORT_TEXT_MAX),
                docker_image=image,
                docker_image_tag=ident(row.get("docker_image_tag"), 100) or "latest",
            )
        )
    return templates
