"""Every command the fabric check runs on a customer's node, built here and nowhere else (the README lists them).

Each value put into a command is checked: ranks and counts are ints, the master address an IPv4 address, the key
body base64; nothing from a pod row reaches a shell unchecked.
"""

from __future__ import annotations

import ipaddress
import re

from rentals.connect import CHECK_PYTHON
from rentals.launch import torchrun_line

SCRIPT_PATH = ".lium-dashboard-fabric-check.py"  # in root's home on the pod; never the customer's own check file
MASTER_PORT = 29511  # not the customers' 29500, in case something of theirs already listens there
KEY_BODY_RE = re.compile(r"[A-Za-z0-9+/]+=*")


def script_write() -> str:
    """Write the connect panel's all-reduce check (one source: rentals/connect.py) to SCRIPT_PATH."""
    return f"cat > {SCRIPT_PATH} <<'PY'\n{CHECK_PYTHON}\nPY"


def allreduce_run(*, nnodes: int, gpus_per_node: int, node_rank: int, master_addr: str, seconds: int) -> str:
    """Run the check on one node, ended by coreutils' timeout after `seconds` whatever happens to the session."""
    master = str(ipaddress.IPv4Address(master_addr))
    line = torchrun_line(
        nnodes=int(nnodes),
        slots=int(gpus_per_node),
        master=master,
        script=SCRIPT_PATH,
        node_rank=node_rank,
        port=MASTER_PORT,
    )
    return f"timeout {int(seconds)} {line}"


def script_remove() -> str:
    """Remove the check's script."""
    return f"rm -f {SCRIPT_PATH}"


def key_remove(public_line: str) -> str:
    """Remove every authorized_keys line holding the check key's base64 body (and nothing else)."""
    parts = public_line.split()
    if len(parts) < 2 or not KEY_BODY_RE.fullmatch(parts[1]):
        raise ValueError("not an OpenSSH public key line")
    return f"sed -i '\\|{parts[1]}|d' ~/.ssh/authorized_keys"
