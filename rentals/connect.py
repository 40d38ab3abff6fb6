"""The connect panel: each member's Jupyter URL and ports, an SSH config, an env file per node, and an
interconnect check to paste next to the hostfile.

Everything here ends up in a shell, an SSH config or an href, so every value is checked again (rows stored
before the pod rows were checked on arrival): a Jupyter URL is http(s) with a host, ports are ints 1-65535,
SSH lines have the documented form (`rentals.upstream.parse.ssh_parts`), overlay IPs are IPv4 and the alias is
built from the pod name's safe characters.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from rentals.launch import MASTER_PORT, ranked_members, slots_per_node, torchrun_line
from rentals.models import ClusterMember
from rentals.upstream.parse import ssh_parts
from rentals.upstream.parse_pods import port_pairs, web_url

CHECK_SCRIPT = "allreduce_check.py"
# An all-reduce of 256 MiB, timed over 20 rounds after 5 warm-ups; rank 0 prints the bus bandwidth (the
# nccl-tests definition: algorithm bandwidth times 2(n-1)/n), which compares across cluster sizes.
CHECK_PYTHON = """import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.ones(64 * 2**20, device="cuda")  # 256 MiB of float32
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(20):
    dist.all_reduce(x)
torch.cuda.synchronize()
seconds = (time.perf_counter() - start) / 20
size = x.numel() * x.element_size()
bus = size / seconds / 1e9 * 2 * (world - 1) / world
if rank == 0:
    print(f"all_reduce {size / 2**20:.0f} MiB over {world} GPUs: {seconds * 1e3:.1f} ms, bus bandwidth {bus:.1f} GB/s")
dist.destroy_process_group()"""


@dataclass(frozen=True)
class MemberAccess:
    """What a member offers besides SSH."""

    rank: int | None
    pod_id: str
    jupyter_url: str
    ports: tuple[tuple[int, int], ...]  # (container port, host port)


def member_access(members: Sequence[ClusterMember]) -> list[MemberAccess]:
    """Return the members with a Jupyter URL or port mappings, by rank."""
    rows = [
        MemberAccess(member.rank, member.pod_id, web_url(member.jupyter_url), port_pairs(member.ports_mapping))
        for member in members
    ]
    return sorted((row for row in rows if row.jupyter_url or row.ports), key=lambda row: (row.rank is None, row.rank))


def safe_name(pod_name: str) -> str:
    """Return the pod name with anything but letters, digits, dot, dash and underscore dropped."""
    return re.sub(r"[^A-Za-z0-9._-]", "", pod_name) or "cluster"


def host_alias(pod_name: str, rank: int) -> str:
    """Return the SSH alias `<pod-name>-rank<N>`."""
    return f"{safe_name(pod_name)}-rank{rank}"


def ssh_config(pod_name: str, members: Sequence[ClusterMember]) -> str:
    """Return `Host <pod-name>-rank<N>` entries for the ranked members with a valid SSH line ("" when none)."""
    entries = []
    for member in sorted((m for m in members if m.rank is not None), key=lambda m: m.rank or 0):
        parts = ssh_parts(member.ssh_command)
        if parts is None:
            continue
        user, host, port = parts
        entries.append(
            f"Host {host_alias(pod_name, member.rank or 0)}\n  HostName {host}\n  User {user}\n  Port {port}\n"
        )
    if not entries:
        return ""
    header = f"# Cluster {safe_name(pod_name)}: add to ~/.ssh/config, then `ssh {host_alias(pod_name, 0)}`.\n"
    return header + "\n".join(entries)


def env_file(members: Sequence[ClusterMember], *, gpus_per_node: int, rank: int) -> str:
    """Return the torchrun environment of the node of `rank` ("" when that rank has no overlay IP)."""
    ranked = ranked_members(members)
    if not any(member.rank == rank for member, _ip in ranked):
        return ""
    slots = slots_per_node(ranked, gpus_per_node)
    values = {
        "MASTER_ADDR": ranked[0][1],
        "MASTER_PORT": MASTER_PORT,
        "NODE_RANK": rank,
        "NNODES": len(ranked),
        "NPROC_PER_NODE": slots,
        "WORLD_SIZE": len(ranked) * slots,
    }
    return "".join(f"{name}={shlex.quote(str(value))}\n" for name, value in values.items())


def env_ranks(members: Sequence[ClusterMember]) -> list[int]:
    """Return the ranks that have an env file."""
    return [member.rank or 0 for member, _ip in ranked_members(members)]


def interconnect_check(members: Sequence[ClusterMember], *, gpus_per_node: int) -> str:
    """Return the shell lines that write the all-reduce check and run it on a node ("" without a master)."""
    ranked = ranked_members(members)
    if not ranked:
        return ""
    line = torchrun_line(
        nnodes=len(ranked),
        slots=slots_per_node(ranked, gpus_per_node),
        master=shlex.quote(ranked[0][1]),
        script=CHECK_SCRIPT,
    )
    return f"cat > {CHECK_SCRIPT} <<'PY'\n{CHECK_PYTHON}\nPY\n{line}"
