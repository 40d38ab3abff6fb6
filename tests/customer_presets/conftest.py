"""Fixtures of the preset and capacity watch tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import SSH_KEY, Simulator

H100 = "hot:infiniband:0x3:0x7fff:NVIDIA H100 80GB HBM3:8"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Cached offers must not leak between tests (the simulator is reset for each)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def cheapest(simulator: Simulator, fabric_id: str = H100, count: int = 2) -> list[str]:
    """The ids of a fabric's cheapest whole free nodes, as the simulator lists them now."""
    fabric = next(offer for offer in simulator.offers() if offer["fabric_id"] == fabric_id)
    whole = [n for n in fabric["nodes"] if n.get("available_gpu_count") in (None, n["gpu_count"])]
    return [n["id"] for n in sorted(whole, key=lambda n: (n["price_per_gpu"] * n["gpu_count"], n["id"]))[:count]]


@pytest.fixture
def make_preset(acme, alice):  # type: ignore[no-untyped-def]
    """Return a function saving a preset for Acme (2 x H100 by default)."""
    from presets.models import Preset

    def make(**fields: Any) -> Preset:
        values: dict[str, Any] = {
            "name": "h100x2",
            "gpu_type": "H100",
            "node_count": 2,
            "pod_name": "train",
            "ssh_public_keys": SSH_KEY,
            "termination_hours": 5,
            "enable_jupyter": True,
        }
        return Preset.objects.create(customer=acme, created_by=alice, **{**values, **fields})

    return make
