"""Fake fabric offers and templates for page tests that must not call the upstream."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from rentals.offers import OfferListing, Template
from rentals.upstream.parse_offers import Fabric, Node

FABRIC = "ib:fabric-1"


def node(node_id: str, price_per_gpu: str) -> Node:
    return Node(
        id=node_id,
        machine_name="H100",
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
    )


def install(monkeypatch: pytest.MonkeyPatch, nodes_by_credential) -> None:  # type: ignore[no-untyped-def]
    """Serve offers of one fabric per credential (`nodes_by_credential(credential)`) and one template each."""

    def offers_get(*, credential, refresh=False):  # type: ignore[no-untyped-def]
        fabric = Fabric(
            fabric_id=FABRIC,
            fabric_type="infiniband",
            link_rate="400G",
            measured=True,
            node_count=2,
            nodes=nodes_by_credential(credential),
        )
        return OfferListing(fabrics=[fabric], fetched_at=time.time())

    def cluster_templates(*, credential):  # type: ignore[no-untyped-def]
        return [Template(id=f"tpl-{credential.name}", name="cluster", image="daturaai/lium-cluster", tag="1")]

    monkeypatch.setattr("rentals.offers.offers_get", offers_get)
    monkeypatch.setattr("rentals.offers.cluster_templates", cluster_templates)
    monkeypatch.setattr("rentals.offers.offers_take", lambda **kwargs: None)
