"""Load generation against one URL: wrk when there is one, else an asyncio httpx client pool."""

# ruff: noqa: S603, S607 - fixed argument lists for our own children

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import time
from typing import Any

from bench.figures import pct, r
from scripts.harness import say


def ensure_wrk(choice: str) -> str | None:
    """Return the wrk binary, installing the Debian package when allowed and possible; None: use Python."""
    if choice == "python":
        return None
    binary = shutil.which("wrk")
    if binary:
        return binary
    if os.geteuid() == 0 and shutil.which("apt-get"):
        say("installing wrk (apt-get install -y wrk) ...")
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                ["apt-get", "install", "-y", "-q", "wrk"],
                check=False,
                timeout=180,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
        binary = shutil.which("wrk")
    if binary is None and choice == "wrk":
        raise RuntimeError("--load-tool wrk: wrk is not installed and could not be installed")
    return binary


def _wrk_ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not match:
        return float("nan")
    value, unit = float(match.group(1)), match.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def load_wrk(wrk: str, url: str, cookie: str, clients: int, seconds: float) -> dict[str, Any]:
    args = [
        wrk,
        "-t2",
        f"-c{clients}",
        f"-d{max(1, round(seconds))}s",
        "--latency",
        "--timeout",
        "10s",
        "-H",
        f"Cookie: {cookie}",
        "-H",
        "HX-Request: true",
        url,
    ]
    out = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60, check=False).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    total = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    if not rps or not p99:
        raise RuntimeError(f"could not parse wrk output:\n{out}")
    return {
        "rps": float(rps.group(1)),
        "p50_ms": r(_wrk_ms(p50.group(1)) if p50 else None),
        "p99_ms": r(_wrk_ms(p99.group(1))),
        "requests": int(total.group(1)) if total else None,
        "non_2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(0) if errors else "",
    }


def load_python(url: str, cookie: str, clients: int, seconds: float) -> dict[str, Any]:
    """asyncio + httpx: `clients` loops on one keep-alive pool, each bounded by the deadline."""
    import httpx

    latencies: list[float] = []
    bad = 0

    async def main() -> float:
        nonlocal bad
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        headers = {"Cookie": cookie, "HX-Request": "true"}
        async with httpx.AsyncClient(limits=limits, headers=headers, timeout=10.0) as client:
            started = time.monotonic()
            deadline = started + seconds

            async def loop() -> None:
                nonlocal bad
                for _ in range(1_000_000):
                    if time.monotonic() >= deadline:
                        return
                    t0 = time.perf_counter()
                    try:
                        response = await client.get(url)
                        if response.status_code >= 400:
                            bad += 1
                    except httpx.HTTPError:
                        bad += 1
                    latencies.append((time.perf_counter() - t0) * 1000)

            await asyncio.gather(*(loop() for _ in range(clients)))
            return time.monotonic() - started

    elapsed = asyncio.run(main())
    return {
        "rps": round(len(latencies) / elapsed, 1),
        "p50_ms": r(pct(latencies, 50)),
        "p99_ms": r(pct(latencies, 99)),
        "requests": len(latencies),
        "non_2xx": bad,
        "socket_errors": "",
    }
