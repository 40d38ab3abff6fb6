"""The reference the dashboard is measured against: rent calls sent straight to the simulator."""

from __future__ import annotations

import time
import uuid

import httpx

from bench.context import SSH_KEY
from rentals.orders.order import RentOrder, request_body_build
from scripts.harness import SIM_KEY, Offers, Simulator
from simulator.clock import parse_iso


class Direct:
    """Free node pairs from the simulator's listing, rent calls straight to it, and when it received them."""

    def __init__(self, sim: Simulator, template_id: str) -> None:
        self.sim = sim
        self.template_id = template_id
        self.offers = Offers(sim.url)

    def node_pairs(self, count: int) -> list[tuple[str, list[str]]]:
        """Return `count` pairs of free, whole nodes on one fabric, never one handed out before."""
        return self.offers.pairs(count)

    def receipts(self) -> dict[str, float]:
        """Return idempotency key -> when the simulator first received a rent call with it (epoch seconds)."""
        first: dict[str, float] = {}
        for row in self.sim.requests():
            key = row.get("idempotency_key")
            if key and key not in first:
                first[key] = parse_iso(row["at"])
        return first

    def rent(self, fabric_id: str, ids: list[str], index: int) -> tuple[str, float, float]:
        """Send one rent call with the dashboard's body: return (key, t0 epoch, round trip ms)."""
        body = request_body_build(
            RentOrder(
                fabric_id=fabric_id,
                executor_ids=ids,
                pod_name=f"direct-{index}",
                public_keys=[SSH_KEY],
                template_id=self.template_id,
            )
        )
        key = str(uuid.uuid4())
        with httpx.Client(base_url=self.sim.url, timeout=30.0) as client:  # a new connection, as the worker's
            t0 = time.time()
            p0 = time.perf_counter()
            response = client.post(
                "/api/executors/cluster/rent",
                content=body,
                headers={
                    "X-API-Key": SIM_KEY,
                    "Idempotency-Key": key,
                    "X-Customer-Ref": "bench",
                    "Content-Type": "application/json",
                },
            )
            rtt = (time.perf_counter() - p0) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"direct rent answered {response.status_code}: {response.text[:300]}")
        return key, t0, rtt
