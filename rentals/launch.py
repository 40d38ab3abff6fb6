"""Launcher material for a rented cluster, built from its members (as the official CLI builds it).

Node 0 (the lowest rank) is the master; NCCL's bootstrap finds peers over the WireGuard overlay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rentals.models import ClusterMember

MASTER_PORT = 29500


@dataclass(frozen=True)
class Launch:
    master_addr: str
    hostfile: str
    torchrun: str
    node_count: int


def cluster_launch(members: Sequence[ClusterMember], *, gpus_per_node: int) -> Launch | None:
    """Return MASTER_ADDR, a hostfile and a torchrun line, or None until every rank has an overlay IP."""
    ranked = sorted((m for m in members if m.rank is not None and m.overlay_ip), key=lambda m: m.rank or 0)
    if not ranked:
        return None
    slots = gpus_per_node or ranked[0].gpu_count or 1
    master = ranked[0].overlay_ip
    hostfile = "\n".join(f"{member.overlay_ip} slots={slots}" for member in ranked)
    torchrun = (
        f"torchrun --nnodes {len(ranked)} --nproc_per_node {slots} --node_rank $NODE_RANK "
        f"--master_addr {master} --master_port {MASTER_PORT} train.py"
    )
    return Launch(master_addr=master, hostfile=hostfile, torchrun=torchrun, node_count=len(ranked))
