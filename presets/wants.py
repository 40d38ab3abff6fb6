"""What a preset or a watch asks of the offers (`NodeWant`), and the nodes found for it (`NodePick`)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from rentals.upstream.parse_offers import Fabric, Node


@dataclass(frozen=True)
class NodeWant:
    """N whole free nodes on one fabric; the filters left empty ("" or None) match anything."""

    node_count: int
    gpu_type: str = ""  # matched case-insensitively within the node's machine name ("H100" finds "NVIDIA H100 …")
    fabric_type: str = ""  # infiniband or roce
    min_link_rate_gbps: int | None = None
    max_price_per_node_hour: Decimal | None = None

    def describe(self) -> str:
        words = [f"{self.node_count} nodes of {self.gpu_type or 'any GPU'} on one fabric"]
        if self.fabric_type:
            words.append("RoCE" if self.fabric_type == "roce" else "InfiniBand")
        if self.min_link_rate_gbps:
            words.append(f"at least {self.min_link_rate_gbps} Gb/s")
        if self.max_price_per_node_hour is not None:
            words.append(f"at most ${self.max_price_per_node_hour:.2f} per node-hour")
        return ", ".join(words)


@dataclass(frozen=True)
class NodePick:
    """The cheapest nodes that fit a want, all on `fabric`."""

    fabric: Fabric
    nodes: list[Node]

    @property
    def executor_ids(self) -> list[str]:
        return [node.id for node in self.nodes]

    @property
    def price_per_hour(self) -> Decimal:
        return sum((node.price_per_hour for node in self.nodes), Decimal(0))

    @property
    def gpu_type(self) -> str:
        return self.nodes[0].machine_name if self.nodes else ""
