"""Reading the check's figures. Strict: anything but exactly one well-formed result line is no figure at all.

Bandwidths are in Gb/s (gigabits), the unit of the fabric's link rate; the check script prints GB/s (gigabytes).
"""

from __future__ import annotations

import re

from django.conf import settings

# What rentals/connect.py's CHECK_PYTHON prints on rank 0.
RESULT_RE = re.compile(
    r"all_reduce \d+ MiB over \d+ GPUs: \d+(?:\.\d+)? ms, bus bandwidth (?P<gbytes>\d+(?:\.\d+)?) GB/s"
)
LINK_RATE_RE = re.compile(r"(?P<gbits>\d+(?:\.\d+)?) Gb/s(?:ec)?\b")


class NoFigure(ValueError):
    """The output holds no single bus bandwidth line."""


def bus_bandwidth_parse(output: str) -> float:
    """Return the bus bandwidth in Gb/s from rank 0's output, else raise NoFigure saying why."""
    lines = [line for line in output.splitlines() if line.startswith("all_reduce ")]
    if len(lines) != 1:
        raise NoFigure(f"expected one all_reduce result line, found {len(lines)}")
    match = RESULT_RE.fullmatch(lines[0].strip())
    if match is None:
        raise NoFigure(f"unreadable result line: {lines[0][:200]!r}")
    gbits = float(match["gbytes"]) * 8
    if gbits <= 0:
        raise NoFigure("the bus bandwidth is 0")
    return gbits


def link_rate_parse(text: str | None) -> float | None:
    """Return a fabric's link rate in Gb/s from its offer text (`400 Gb/sec (4X NDR)`), or None when unstated."""
    match = LINK_RATE_RE.match((text or "").strip())
    return float(match["gbits"]) if match and float(match["gbits"]) > 0 else None


def floor_gbps(link_rate_gbps: float, gpus_per_node: int, fraction: float | None = None) -> float:
    """Return the lowest acceptable bus bandwidth: fraction (FABRIC_CHECK_FLOOR_FRACTION) x link rate x GPUs."""
    share = settings.FABRIC_CHECK_FLOOR_FRACTION if fraction is None else fraction
    return share * link_rate_gbps * gpus_per_node
