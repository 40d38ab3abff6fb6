"""What a simulated pod answers over SSH: the fabric check's commands, and nothing else.

Recognised, each as the whole command line (anything else: exit 127, "command not allowed in the simulator"):
- ``cat > <path>.py <<'PY'`` + script + ``PY``: writes the script, which must be an all-reduce (``dist.all_reduce``);
- ``[timeout S ]torchrun --nnodes N --nproc_per_node G --node_rank R --master_addr A --master_port P <path>.py``;
- ``rm -f <path>.py``;
- ``sed -i '\\|<key base64>|d' ~/.ssh/authorized_keys``: removes that key from the pod's authorized keys.

The torchrun sessions of one cluster meet at (master addr, port, nnodes): each waits (bounded) for the others,
then rank 0 prints the check's line with the bus bandwidth of the slowest node. The model: a healthy node gives
link rate (Gb/s) x GPUs per node x 0.9, a node on a ``slow_executors`` executor a fifth of that; printed in GB/s.
On a ``stalled_executors`` executor every command hangs (a hung node): the session opens, nothing answers. On a
``broken_executors`` executor torchrun fails at once with an NCCL error (the others wait for it in vain).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("simulator")

WRITE_RE = re.compile(r"cat > (?P<path>[\w./-]+\.py) <<'PY'\n(?P<body>.*)\nPY", re.DOTALL)
RUN_RE = re.compile(
    r"(?:timeout (?P<limit>\d+) )?torchrun --nnodes (?P<nnodes>\d+) --nproc_per_node (?P<nproc>\d+) "
    r"--node_rank (?P<rank>\d+) --master_addr (?P<addr>[\d.]+) --master_port (?P<port>\d+) (?P<path>[\w./-]+\.py)"
)
RM_RE = re.compile(r"rm -f (?P<path>[\w./-]+\.py)")
KEY_RE = re.compile(r"sed -i '\\\|(?P<body>[A-Za-z0-9+/]+=*)\|d' ~/\.ssh/authorized_keys")
LINK_RATE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*Gb/s")

STALL_SECONDS = 3600.0  # how long a stalled node's command hangs at most when the client never hangs up
RENDEZVOUS_SECONDS = 60.0  # torchrun's own wait is longer; a bounded wait keeps a lost session from lingering
DEFAULT_LINK_GBPS = 100.0  # a fabric without a stated link rate
HEALTHY = 0.9  # share of the line rate a healthy node reaches
SLOW = 0.2  # a slow node reaches a fifth of a healthy one
CHECK_BYTES = 256 * 2**20  # the check's tensor, as in rentals/connect.py


@dataclass
class Rendezvous:
    """The torchrun sessions of one all-reduce that have joined so far."""

    nnodes: int
    joined: dict[int, float] = field(default_factory=dict)  # node rank -> that node's bus bandwidth (Gb/s)
    full: asyncio.Event = field(default_factory=asyncio.Event)


def node_gbps(view: dict[str, Any]) -> float:
    """Return the bus bandwidth one node reaches in Gb/s (see the module's model)."""
    match = LINK_RATE_RE.match(view["link_rate"] or "")
    rate = float(match.group(1)) if match else DEFAULT_LINK_GBPS
    return rate * view["gpu_count"] * HEALTHY * (SLOW if view["slow"] else 1.0)


def result_line(gbps: float, world: int) -> str:
    """Return rank 0's line, as the check script prints it."""
    bus = gbps / 8  # GB/s
    seconds = CHECK_BYTES * 2 * (world - 1) / world / (bus * 1e9) if world > 1 else 0.0
    return f"all_reduce 256 MiB over {world} GPUs: {seconds * 1e3:.1f} ms, bus bandwidth {bus:.1f} GB/s\n"


async def pod_command(farm: Any, pod_id: str, process: Any) -> None:
    """Answer one SSH session's command and exit with its status."""
    try:
        status = await _dispatch(farm, pod_id, process.command or "", process)
    except Exception:
        log.exception("ssh: command failed on pod %s", pod_id)
        status = 1
    process.exit(status)


async def _dispatch(farm: Any, pod_id: str, command: str, process: Any) -> int:
    view = farm.pod_view(pod_id)
    if view is not None and view["stalled"]:
        # A hung node: the session is open but nothing ever answers, until the client gives up.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.channel.wait_closed(), STALL_SECONDS)
        return 1
    files = farm.files.setdefault(pod_id, {})
    if (m := WRITE_RE.fullmatch(command)) and "dist.all_reduce" in m["body"]:
        files[m["path"]] = m["body"]
        return 0
    if m := RM_RE.fullmatch(command):
        files.pop(m["path"], None)
        return 0
    if m := KEY_RE.fullmatch(command):
        farm.remove_key(pod_id, m["body"])
        return 0
    if m := RUN_RE.fullmatch(command):
        if m["path"] not in files:
            process.stderr.write(f"can't open file '{m['path']}': [Errno 2] No such file or directory\n")
            return 2
        return await _torchrun(farm, pod_id, m, process)
    process.stderr.write("command not allowed in the simulator\n")
    return 127


async def _torchrun(farm: Any, pod_id: str, m: re.Match[str], process: Any) -> int:
    """Join the cluster's rendezvous, wait (bounded) for every node, then rank 0 prints the figure."""
    view = farm.pod_view(pod_id)
    nnodes, nproc, rank = int(m["nnodes"]), int(m["nproc"]), int(m["rank"])
    if view is None or not 1 <= nnodes <= 64 or rank >= nnodes or nproc < 1:
        process.stderr.write("torchrun: bad --nnodes, --nproc_per_node or --node_rank\n")
        return 1
    if view["broken"]:
        process.stderr.write("torch.distributed.DistBackendError: NCCL error: unhandled system error\n")
        return 1
    if rank == 0 and m["addr"] != view["overlay_ip"]:
        process.stderr.write(f"torch.distributed: cannot bind {m['addr']}:{m['port']} on this node\n")
        return 1
    key = (view["cluster_id"], m["addr"], m["port"], nnodes)
    rendezvous = farm.rendezvous.setdefault(key, Rendezvous(nnodes))
    if rank in rendezvous.joined:
        process.stderr.write(f"torch.distributed: node_rank {rank} joined twice\n")
        return 1
    rendezvous.joined[rank] = node_gbps(view)
    if len(rendezvous.joined) == nnodes:
        farm.rendezvous.pop(key, None)
        rendezvous.full.set()
    limit = int(m["limit"]) if m["limit"] else None
    wait = min(limit, RENDEZVOUS_SECONDS) if limit else RENDEZVOUS_SECONDS
    try:
        await asyncio.wait_for(rendezvous.full.wait(), wait)
    except TimeoutError:
        rendezvous.joined.pop(rank, None)
        if not rendezvous.joined and farm.rendezvous.get(key) is rendezvous:
            farm.rendezvous.pop(key, None)
        if limit is not None and limit <= RENDEZVOUS_SECONDS:
            return 124  # what coreutils' timeout answers when it ends the command
        process.stderr.write(f"torch.distributed: timed out after {wait:.0f} s waiting for {nnodes} nodes\n")
        return 1
    if rank == 0:
        process.stdout.write(result_line(min(rendezvous.joined.values()), nnodes * nproc))
    return 0
