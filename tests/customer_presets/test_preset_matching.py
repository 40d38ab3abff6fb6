"""The cheapest matching nodes on one fabric (`presets.matching`), on offers built here."""

from __future__ import annotations

import time
from dataclasses import replace
from decimal import Decimal

from presets.matching import nodes_pick, preset_nodes_pick
from presets.models import Preset
from presets.wants import NodeWant
from rentals.offers import OfferListing
from rentals.upstream.parse_offers import Fabric, Node


def _node(node_id: str, price_per_gpu: str, machine: str = "NVIDIA H100 80GB HBM3", **extra: object) -> Node:
    return Node(
        id=node_id,
        machine_name=machine,
        gpu_count=8,
        price_per_gpu=Decimal(price_per_gpu),
        location="",
        country_code="",
        reliability_score=None,
        max_cuda_version="",
        nvlink=True,
        gpu_power_limited=False,
        last_verified_at="",
        ip="",
        **extra,  # type: ignore[arg-type]
    )


def _fabric(fabric_id: str, nodes: list[Node], *, link_rate: str = "400 Gb/sec (4X NDR)", kind: str = "infiniband"):  # type: ignore[no-untyped-def]
    return Fabric(
        fabric_id=fabric_id, fabric_type=kind, link_rate=link_rate, measured=True, node_count=len(nodes), nodes=nodes
    )


def _listing(*fabrics: Fabric) -> OfferListing:
    return OfferListing(fabrics=list(fabrics), fetched_at=time.time())


def test_the_cheapest_nodes_of_the_cheapest_fabric_are_picked() -> None:
    dear = _fabric("ib:dear", [_node("d1", "3"), _node("d2", "3"), _node("d3", "3")])
    cheap = _fabric("ib:cheap", [_node("c1", "2.5"), _node("c2", "2"), _node("c3", "2.1")])
    pick, reason = nodes_pick(NodeWant(node_count=2, gpu_type="h100"), _listing(dear, cheap))
    assert pick is not None and reason == ""
    assert pick.fabric.fabric_id == "ib:cheap"
    assert pick.executor_ids == ["c2", "c3"]
    assert pick.price_per_hour == Decimal("32.8")


def test_never_mixes_fabrics_even_when_two_together_would_fit() -> None:
    listing = _listing(_fabric("ib:a", [_node("a1", "2")]), _fabric("ib:b", [_node("b1", "2")]))
    pick, reason = nodes_pick(NodeWant(node_count=2), listing)
    assert pick is None
    assert "the most that fit on one fabric: 1" in reason


def test_the_filters_price_link_rate_type_gpu_and_whole_nodes() -> None:
    nodes = [
        _node("cheap", "1"),
        _node("dear", "5"),
        _node("a100", "1", machine="NVIDIA A100-SXM4-80GB"),
        _node("split", "1", available_gpu_count=4),
        _node("fine", "2"),
    ]
    listing = _listing(_fabric("ib:x", nodes))
    pick, _ = nodes_pick(NodeWant(node_count=2, gpu_type="H100", max_price_per_node_hour=Decimal(16)), listing)
    assert pick is not None and pick.executor_ids == ["cheap", "fine"]
    assert nodes_pick(NodeWant(node_count=2, min_link_rate_gbps=800), listing)[0] is None
    assert nodes_pick(NodeWant(node_count=2, fabric_type="roce"), listing)[0] is None
    slow = _listing(replace(listing.fabrics[0], link_rate=""))
    none, reason = nodes_pick(NodeWant(node_count=2, min_link_rate_gbps=100), slow)
    assert none is None and "at least 100 Gb/s" in reason


def test_a_preset_picks_from_the_offers_given(acme) -> None:  # type: ignore[no-untyped-def]
    preset = Preset(customer=acme, name="h100x2", node_count=2, gpu_type="H100", pod_name="p", ssh_public_keys="k")
    listing = _listing(_fabric("ib:x", [_node("n1", "2"), _node("n2", "2"), _node("n3", "1")]))
    pick, _ = preset_nodes_pick(preset, listing)
    assert pick is not None and pick.executor_ids == ["n3", "n1"]
    preset.max_price_per_node_hour = Decimal("8.5")
    pick, reason = preset_nodes_pick(preset, listing)
    assert pick is None and "at most $8.50 per node-hour" in reason
