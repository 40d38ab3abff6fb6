"""Launcher material for a rented cluster, built from its members (as the official CLI builds it).

Node 0 (the lowest rank) is the master; NCCL's bootstrap finds peers over the WireGuard overlay.
These lines are copied into a shell: every value in them is checked (an overlay IP must be an IPv4 address,
counts are integers) and shell-quoted, so a member row can never smuggle a command into them.
"""

from __future__ import annotations

import ipaddress
import shlex
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


def _overlay_ip(member: ClusterMember) -> str:
    """Return the member's overlay IP when it is a valid IPv4 address (rows stored before it was checked)."""
    try:
        return str(ipaddress.IPv4Address(member.overlay_ip))
    except ValueError:
        return ""


def ranked_members(members: Sequence[ClusterMember]) -> list[tuple[ClusterMember, str]]:
    """Return the ranked members with a valid overlay IP, as (member, IP), lowest rank (the master) first."""
    return sorted(
        ((member, ip) for member in members if member.rank is not None and (ip := _overlay_ip(member))),
        key=lambda pair: pair[0].rank or 0,
    )


def slots_per_node(ranked: list[tuple[ClusterMember, str]], gpus_per_node: int) -> int:
    """Return the processes per node: the order's GPUs per node, else the master's GPU count, else 1."""
    return int(gpus_per_node or ranked[0][0].gpu_count or 1)


def torchrun_line(
    *, nnodes: int, slots: int, master: str, script: str, node_rank: int | None = None, port: int = MASTER_PORT
) -> str:
    """Return the torchrun line a node runs (`$NODE_RANK` unless a rank is given); `master` is already shell-quoted."""
    rank = "$NODE_RANK" if node_rank is None else str(int(node_rank))
    return (
        f"torchrun --nnodes {nnodes} --nproc_per_node {slots} --node_rank {rank} "
        f"--master_addr {master} --master_port {port} {script}"
    )


def cluster_launch(members: Sequence[ClusterMember], *, gpus_per_node: int) -> Launch | None:
    """Return MASTER_ADDR, a hostfile and a torchrun line, or None until a ranked member has an overlay IP."""
    ranked = ranked_members(members)
    if not ranked:
        return None
    slots = slots_per_node(ranked, gpus_per_node)
    master = shlex.quote(ranked[0][1])
    hostfile = "\n".join(f"{shlex.quote(ip)} slots={slots}" for _member, ip in ranked)
    torchrun = torchrun_line(nnodes=len(ranked), slots=slots, master=master, script="train.py")
    return Launch(master_addr=master, hostfile=hostfile, torchrun=torchrun, node_count=len(ranked))
