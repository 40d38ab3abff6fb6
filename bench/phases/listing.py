"""Phase: a large account's pod listing. How long does `LiumClient.list_pods()` take to read N pods over loopback
HTTP, and how much memory does it hold at its peak?

Each figure is taken in a fresh child process (`python -m bench.phases.listing --pods N --mode M`), so one
measurement's memory never inflates another's. The child serves the listing from a thread of its own (a
`http.server` on 127.0.0.1, rows made as they are sent, as a server streams them) and reads it with the
dashboard's client: `stream` (the shipped path: parsed row by row as it arrives) gives the time and the peak
RSS growth; `tracemalloc` the Python heap's peak (slower: not timed); `whole` reads the whole body and then
decodes it (the path before streaming, without its 8 MB cap), for comparison. Needs no database or stack.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODES = ("stream", "tracemalloc", "whole")
REPO_ROOT = Path(__file__).resolve().parents[2]


def pod(n: int) -> dict[str, Any]:
    """A pod row as the simulator's listing renders it (about 1 KB of JSON)."""
    return {
        "id": f"7c9e6679-7425-40de-944b-{n:012d}",
        "pod_name": f"team-{n % 997}-job",
        "status": "RUNNING",
        "ssh_connect_cmd": f"ssh root@203.0.113.{n % 250 + 1} -p {20000 + n % 40000}",
        "ports_mapping": {"22": 20000 + n % 40000},
        "created_at": "2026-12-01T10:00:00.000Z",
        "updated_at": "2026-12-01T10:00:08.000Z",
        "price": 15.92,
        "gpu_count": 8,
        "template": {"id": "tpl-1", "name": "PyTorch 2.4 + CUDA 12.4", "docker_image": "daturaai/pytorch"},
        "executor": {"id": f"exec-{n:08d}", "machine_name": "8x NVIDIA H100 80GB HBM3", "gpu_count": 8},
        "cluster_id": f"cl-{n // 8:06d}",
        "cluster_node_index": n % 8,
        "cluster_overlay_ip": f"10.42.0.{n % 8 + 1}",
        "removal_scheduled_at": None,
        "jupyter_url": None,
        "api_key_id": "key-main",
        "api_key_name": "main",
        "estimated_ready_seconds": None,
        "eta_basis": None,
        "phase": None,
    }


def listing_chunks(count: int, rows_per_chunk: int = 64) -> Iterator[bytes]:
    yield b"["
    for start in range(0, count, rows_per_chunk):
        rows = ",".join(json.dumps(pod(n)) for n in range(start, min(count, start + rows_per_chunk)))
        yield (("," if start else "") + rows).encode()
    yield b"]"


def serve(count: int) -> tuple[ThreadingHTTPServer, str]:
    """Serve `GET /api/pods` (chunked, made as sent) on 127.0.0.1 from a daemon thread; return it and its URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in listing_chunks(count):
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/api"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(count: int, mode: str) -> dict[str, Any]:
    """Measure one read in this process (Django set up, no database touched)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.conf import settings

    from rentals import upstream
    from rentals.upstream.parse_pods import pod_listing

    settings.LIUM_TIMEOUT_SECONDS = 600.0  # tracemalloc slows the read many times over; nothing is timed then
    settings.POD_LISTING_MAX_PODS = max(count, settings.POD_LISTING_MAX_PODS)
    server, base_url = serve(count)
    http = upstream.new_http_client()
    client = upstream.LiumClient(base_url=base_url, auth=upstream.Auth(scheme="api_key", secret="bench"), http=http)  # noqa: S106 - no server checks it
    before = rss_mb()
    started = time.perf_counter()
    if mode == "tracemalloc":
        tracemalloc.start()
        rows = client.list_pods()
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result = {"traced_peak_mb": round(peak / 2**20, 1), "traced_kept_mb": round(kept / 2**20, 1)}
    elif mode == "whole":
        body = http.get(base_url + "/pods").content
        rows = pod_listing(json.loads(body))
        result = {"body_mb": round(len(body) / 2**20, 1)}
    else:
        rows = client.list_pods()
        result = {}
    result["seconds"] = round(time.perf_counter() - started, 2)
    result["rss_growth_mb"] = round(hwm_mb() - before, 1)
    result["rows"] = len(rows)
    server.shutdown()
    return result


def measure_listing(run: Any) -> None:
    """Run each mode in its own child; figures under `listing`."""
    from bench.figures import machine
    from scripts.harness import say

    run.result.setdefault("machine", machine())
    count = run.args.listing_pods
    say(f"\n[listing] GET /pods of {count} pods over loopback HTTP, each mode in a fresh process")
    figures: dict[str, Any] = {"pods": count}
    for mode in MODES:
        out = subprocess.run(  # noqa: S603 - this interpreter, this module, our own arguments
            [sys.executable, "-m", "bench.phases.listing", "--pods", str(count), "--mode", mode],
            cwd=REPO_ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", "LOG_LEVEL": "WARNING"},
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        figures[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        say(f"  {mode}: {figures[mode]}")
    run.result["listing"] = figures
    stream, traced, whole = figures["stream"], figures["tracemalloc"], figures["whole"]
    run.summary.append(
        (
            f"pod listing of {count} (s / RSS growth MB)",
            f"{stream['seconds']} / {stream['rss_growth_mb']} (heap peak {traced['traced_peak_mb']} MB; "
            f"whole body first: {whole['seconds']} / {whole['rss_growth_mb']})",
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--mode", choices=MODES, default="stream")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))
    print(json.dumps(child(args.pods, args.mode)), flush=True)


if __name__ == "__main__":
    main()
