"""The bench's small arithmetic and the machine it ran on."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of the values, or None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def parse_sizes(text: str) -> list[int]:
    return sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gb = round(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        mem_gb = None
    return {
        "cpu": cpu,
        "cpus": len(os.sched_getaffinity(0)),
        "mem_gb": mem_gb,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "hostname": platform.node(),
    }
