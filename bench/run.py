#!/usr/bin/env python
"""Benchmarks against the real stack: gunicorn, the simulator, real Celery workers, the configured database.

    make bench
    make bench BENCH_ARGS="--submit-rentals 300 --poll-seconds 15 --search-rows 100000,1000000"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lium_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/14 make bench

It starts, in a temporary run folder, its own simulator, gunicorn (deploy/gunicorn.conf.py, bench URLconf)
and Celery workers, on its own database: SQLite in the run folder, or, when DATABASE_URL is PostgreSQL, a
dedicated database on that server (`--db-name`, default lium_bench; dropped and created at the start,
dropped at the end unless `--keep-db`). The broker is CELERY_BROKER_URL (default: the embedded file-system
transport). Every child process is stopped at the end or on error. The last line of output is one JSON
object holding every figure; bench/README.md explains them.
"""

# ruff: noqa: S603, S607, S608 - fixed argument lists for our own children; SQL names are model tables, not input

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

SIM_KEY = "sim-demo-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ bench@run"
PASSWORD = "bench-password-1"  # noqa: S105 - a throwaway user in a throwaway database
SETTLED = ("rented", "ready", "degraded", "refused", "failed", "unknown", "not_rented", "cancelled")
HARD_DEADLINE_SECONDS = 30 * 60

# Every process of the run (this one too) gets these before Django reads its settings.
RUN_ENV = {
    "DJANGO_SETTINGS_MODULE": "bench.settings",
    "DEBUG": "0",  # as in production: no query log kept in memory, no debug pages
    "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    "LOG_LEVEL": "WARNING",
    "SWEEP_INTERVAL_SECONDS": "2",
    "RENT_QUEUED_STUCK_SECONDS": "60",
    "POD_POLL_MIN_INTERVAL_SECONDS": "3",
    "LIUM_TIMEOUT_SECONDS": "10",
    "PYTHONUNBUFFERED": "1",
}


def say(message: str = "") -> None:
    print(message, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench/run.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--submit-rentals", type=int, default=200, help="rentals for the submit-to-upstream latency")
    p.add_argument("--poll-seconds", type=float, default=10.0, help="seconds per poll load run (one per round)")
    p.add_argument("--poll-clients", type=int, default=50, help="concurrent clients for the poll benchmark")
    p.add_argument("--poll-rounds", type=int, default=5, help="rounds of the poll benchmark (ratio: median of rounds)")
    p.add_argument("--page-rows", default="10000,100000", help="rental counts for the page-cost benchmark")
    p.add_argument("--page-samples", type=int, default=15, help="requests per page and size (median taken)")
    p.add_argument(
        "--search-rows",
        default="100000",
        help="rental counts for the support search (PostgreSQL only), e.g. 100000,1000000",
    )
    p.add_argument("--search-samples", type=int, default=40, help="searches per identifier kind and size")
    p.add_argument("--engine-rentals", type=int, default=60, help="rentals per worker count for engine throughput")
    p.add_argument("--engine-workers", default="1,2,4", help="worker process counts for engine throughput")
    p.add_argument(
        "--submit-budget",
        type=float,
        default=150.0,
        help="seconds at most for the submit phase (the embedded broker is slow: fewer rentals then)",
    )
    p.add_argument("--engine-budget", type=float, default=45.0, help="seconds at most per engine run")
    p.add_argument(
        "--fs-polling-interval",
        type=float,
        default=None,
        help="experiment: the file-system broker's polling interval (not the project's setting)",
    )
    p.add_argument("--fabrics", type=int, default=64)
    p.add_argument("--nodes-per-fabric", type=int, default=32)
    p.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (WEB_CONCURRENCY)")
    p.add_argument("--web-threads", type=int, default=4, help="gunicorn threads per worker")
    p.add_argument(
        "--load-tool",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="auto: wrk if installed (installed with apt-get when root), else the Python client",
    )
    p.add_argument("--db-name", default="lium_bench", help="dedicated database name on the PostgreSQL server")
    p.add_argument("--keep-db", action="store_true", help="keep the PostgreSQL bench database at the end")
    p.add_argument("--keep-run-dir", action="store_true", help="keep the run folder (logs) at the end")
    p.add_argument("--only", default="", help="comma list of phases: submit,engine,poll,pages,search (default all)")
    return p.parse_args(argv)


# --- Processes -----------------------------------------------------------------------------------------


class Processes:
    """Every child of the run, each in its own session so that stopping it takes its whole group."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.children: list[subprocess.Popen] = []

    def start(self, args: list[str], *, log_name: str, env: dict[str, str]) -> subprocess.Popen:
        with open(self.run_dir / log_name, "ab") as log:
            process = subprocess.Popen(
                args,
                cwd=REPO_ROOT,
                env=env,
                start_new_session=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.children.append(process)
        return process

    @staticmethod
    def stop(process: subprocess.Popen) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
        # The group may outlive its leader (a pool child): take it down too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.poll() is None:
            process.wait(timeout=5)

    def stop_all(self) -> None:
        for process in reversed(self.children):
            self.stop(process)


def wait_http(url: str, process: subprocess.Popen, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} before answering")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces: split after the last ")".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class Workers:
    """One `celery worker` (with beat, hence the sweeper) with N pool processes; peak memory kept."""

    def __init__(self, procs: Processes, env: dict[str, str]) -> None:
        self.procs = procs
        self.env = env
        self.process: subprocess.Popen | None = None
        self.peak_main_mb = 0.0
        self.peak_pool_mb = 0.0
        self.count = 0

    def start(self, concurrency: int) -> None:
        self.stop()
        self.count += 1
        log_name = f"worker-{self.count}.log"
        args = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "dashboard",
            "worker",
            "--loglevel=INFO",
            f"--concurrency={concurrency}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--beat",
            f"--schedule={self.procs.run_dir / f'beat-{self.count}'}",
        ]
        self.process = self.procs.start(args, log_name=log_name, env=self.env)
        log = self.procs.run_dir / log_name
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited: {log.read_text(errors='replace')[-2000:]}")
            if " ready." in log.read_text(errors="replace"):
                return
            time.sleep(0.1)
        raise RuntimeError("celery worker did not become ready within 60 s")

    def sample_memory(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        main = vm_hwm_mb(self.process.pid) or 0.0
        pool = [vm_hwm_mb(pid) or 0.0 for pid in children_of(self.process.pid)]
        self.peak_main_mb = max(self.peak_main_mb, main)
        self.peak_pool_mb = max([self.peak_pool_mb, *pool])

    def stop(self) -> None:
        if self.process is not None:
            self.sample_memory()
            Processes.stop(self.process)
            self.process = None


class ScratchPostgres:
    """The bench's own database on the given PostgreSQL server (never the one the URL names, unless equal)."""

    def __init__(self, url: str, name: str) -> None:
        parts = urlsplit(url)
        self.netloc = parts.netloc
        self.name = name
        self.url = urlunsplit(("postgres", parts.netloc, "/" + name, parts.query, ""))

    def _execute(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"postgresql://{self.netloc}/postgres", autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def create(self) -> None:
        self.drop()
        self._execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


# --- Load generation ----------------------------------------------------------------------------------


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


# --- Bulk rows ----------------------------------------------------------------------------------------


class Bulk:
    """Fast inserts of model rows: COPY on PostgreSQL, executemany on SQLite; values converted per column."""

    def __init__(self, model: Any, connection: Any) -> None:
        from django.db import models

        self.model = model
        self.connection = connection
        self.pg = connection.vendor == "postgresql"
        # Only rentals get explicit ids (their children point at them); the children's ids come from the database.
        self.fields = [f for f in model._meta.concrete_fields if not (f.primary_key and model.__name__ != "Rental")]
        self.columns = [f.column for f in self.fields]
        self.convert = []
        for f in self.fields:
            if isinstance(f, models.UUIDField):
                self.convert.append(
                    (lambda v: None if v is None else str(v)) if self.pg else (lambda v: None if v is None else v.hex)
                )
            elif isinstance(f, models.DateTimeField):
                self.convert.append(
                    (lambda v: None if v is None else v.isoformat())
                    if self.pg
                    else (lambda v: None if v is None else v.replace(tzinfo=None).isoformat(" "))
                )
            elif isinstance(f, models.JSONField):
                self.convert.append(json.dumps)
            elif isinstance(f, models.DecimalField):
                self.convert.append(lambda v: None if v is None else str(v))
            elif isinstance(f, models.BooleanField):
                self.convert.append(bool if self.pg else int)
            else:
                self.convert.append(lambda v: v)
        self.rows: list[tuple] = []

    def add(self, values: dict[str, Any]) -> None:
        self.rows.append(tuple(conv(values.get(f.attname)) for f, conv in zip(self.fields, self.convert, strict=True)))
        if len(self.rows) >= 20000:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        table = self.model._meta.db_table
        cols = ", ".join(f'"{c}"' for c in self.columns)
        with self.connection.cursor() as cursor:
            if self.pg:
                with cursor.cursor.copy(f'COPY "{table}" ({cols}) FROM STDIN') as copy:
                    for row in self.rows:
                        copy.write_row(row)
            else:
                marks = ", ".join("?" for _ in self.columns)
                self.connection.connection.executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', self.rows)
        self.rows = []


BENCH_TENANTS = 400  # other customers (with a user each) that hold one rental in TENANT_SHARE
TENANT_SHARE = 4


def bench_tenants(credential: Any) -> list[tuple[int, int, str]]:
    """Create (once) the other customers of the bulk data, each with its own user: [(customer pk, user pk, ref)].

    Support search needs realistic data: many customers whose names share a prefix ("Bench Tenant 01" matches
    ten of them), refs shared by hundreds of rentals, users whose e-mail is stored in mixed case.
    """
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User

    from accounts.models import Customer

    names = [f"Bench Tenant {i:03d}" for i in range(BENCH_TENANTS)]
    if not Customer.objects.filter(name=names[0]).exists():
        Customer.objects.bulk_create(
            Customer(name=name, customer_ref=f"tenant-{i:03d}", default_credential=credential)
            for i, name in enumerate(names)
        )
        User.objects.bulk_create(
            User(
                username=f"bench-tenant-{i:03d}",
                email=f"Ops+{i:03d}@Tenant{i:03d}.invalid",
                password=make_password(None),
            )
            for i in range(BENCH_TENANTS)
        )
    customers = dict(Customer.objects.filter(name__in=names).values_list("name", "pk"))
    users = dict(User.objects.filter(username__startswith="bench-tenant-").values_list("username", "pk"))
    return [(customers[name], users[f"bench-tenant-{i:03d}"], f"tenant-{i:03d}") for i, name in enumerate(names)]


def bulk_rentals(
    *,
    start: int,
    count: int,
    customer: Any,
    credential: Any,
    user: Any,
    samples: dict[str, list],
    tenants: list[tuple[int, int, str]] | None = None,
) -> None:
    """Insert `count` historical rentals (ids start+1..) with nodes, members and one attempt each.

    Every TENANT_SHARE-th rental belongs to one of `tenants` (created by its user, tagged with its ref); the
    others to `customer` (created by `user`), tagged with one of 997 refs (so a ref is shared by ~N/1330 rentals).
    """
    import random

    from django.db import connection, transaction

    from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt

    rng = random.Random(start)  # noqa: S311 - reproducible data, not crypto
    now = datetime.now(UTC)
    rentals, nodes, members, attempts = (Bulk(m, connection) for m in (Rental, RentalNode, ClusterMember, RentAttempt))
    statuses = (
        ["terminated"] * 70
        + ["ready"] * 12
        + ["refused"] * 6
        + ["failed"] * 4
        + ["cancelled"] * 3
        + ["degraded"] * 2
        + ["unknown"] * 1
        + ["not_rented"] * 2
    )
    sample_every = max(1, count // 400)
    body = json.dumps({"pod_name": "x", "executor_uuids": ["a", "b"], "user_public_key": [SSH_KEY]}).encode()
    base = {
        "created_by_id": user.pk,
        "customer_id": customer.pk,
        "credential_id": credential.pk,
        "gpu_type": "NVIDIA H100",
        "gpus_per_node": 8,
        "price_per_hour": "34.0000",
        "submit_token": None,
        "request_body": body,
        "body_sha256": "0" * 64,
        "next_attempt_at": None,
        "lease_until": None,
        "lease_token": None,
        "error_message": "",
        "error_hint": "",
        "replayed": False,
        "removal_scheduled_at": None,
    }
    with transaction.atomic():
        for n in range(start + 1, start + count + 1):
            status = statuses[n % len(statuses)]
            created = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
            executor_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(2)]
            holds = status in ("terminated", "ready", "degraded")
            cluster_id = str(uuid.uuid4()) if holds else ""
            pod_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(2)] if holds else []
            request_id = f"req_{rng.getrandbits(64):016x}"
            pod_name = f"job-{n}-{rng.getrandbits(16):04x}"
            owner = {}
            if tenants and n % TENANT_SHARE == 0:
                customer_pk, user_pk, ref = tenants[rng.randrange(len(tenants))]
                owner = {"customer_id": customer_pk, "created_by_id": user_pk}
            else:
                ref = f"team-{n % 997}"
            public_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            idempotency_key = uuid.UUID(int=rng.getrandbits(128), version=4)
            rentals.add(
                {
                    **base,
                    **owner,
                    "id": n,
                    "public_id": public_id,
                    "fabric_id": f"hot:infiniband:0x{n % 64:x}:0x7fff:NVIDIA H100 80GB HBM3:8",
                    "executor_ids": executor_ids,
                    "pod_name": pod_name,
                    "customer_ref": ref,
                    "idempotency_key": idempotency_key,
                    "status": status,
                    "attempt_count": 1,
                    "first_sent_at": created,
                    "last_sent_at": created,
                    "possibly_sent": status != "refused",
                    "pod_ids": pod_ids,
                    "cluster_id": cluster_id,
                    "error_code": "executor_not_available" if status == "refused" else "",
                    "error_request_id": request_id if status in ("refused", "failed", "unknown") else "",
                    "created_at": created,
                    "updated_at": created + timedelta(minutes=5),
                    "version": 4,
                }
            )
            for executor_id in executor_ids:
                nodes.add({"rental_id": n, "executor_id": executor_id})
            for rank, pod_id in enumerate(pod_ids):
                members.add(
                    {
                        "rental_id": n,
                        "pod_id": pod_id,
                        "rank": rank,
                        "overlay_ip": f"10.42.0.{rank + 1}",
                        "status": "RUNNING",
                        "phase": "",
                        "eta_seconds": None,
                        "ssh_command": f"ssh root@198.18.{n % 250}.{rank} -p 2200{rank}",
                        "executor_id": executor_ids[rank],
                        "price_per_hour": "17.0000",
                        "gpu_count": 8,
                        "first_seen_at": created,
                        "running_since": created + timedelta(seconds=9),
                        "gone_at": created + timedelta(hours=3) if status == "terminated" else None,
                        "updated_at": created + timedelta(minutes=5),
                    }
                )
            attempts.add(
                {
                    "rental_id": n,
                    "number": 1,
                    "started_at": created,
                    "duration_ms": 40,
                    "http_status": 409 if status == "refused" else 200,
                    "classification": "refused" if status == "refused" else "confirmed",
                    "error_code": "",
                    "message": "",
                    "replayed": False,
                    "request_id": request_id,
                }
            )
            if n % sample_every == 0:
                samples["rental id"].append(str(public_id))
                samples["idempotency key"].append(str(idempotency_key))
                samples["request id"].append(request_id)
                samples["executor id"].append(executor_ids[0])
                samples["pod name"].append(pod_name[: len(pod_name) - 5])  # a prefix: "job-<n>"
                samples["customer ref"].append(ref)
                if holds:
                    samples["pod id"].append(pod_ids[0])
                    samples["cluster id"].append(cluster_id)
        for bulk in (rentals, nodes, members, attempts):
            bulk.flush()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            table = Rental._meta.db_table
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('\"{table}\"', 'id'), "
                f'(SELECT COALESCE(MAX(id), 1) FROM "{table}"))'
            )
            # VACUUM too: autovacuum would otherwise start on the fresh rows while the searches are timed. A
            # dashboard that grew to this size has had them vacuumed long ago.
            for model in (Rental, RentalNode, ClusterMember, RentAttempt):
                cursor.execute(f'VACUUM ANALYZE "{model._meta.db_table}"')


# --- The run ------------------------------------------------------------------------------------------


def section_render_ms(rental: Any, samples: int = 50) -> float | None:
    """Median time to render a rental's progress section on a cache miss (the first poll after a change).

    Measured in this process, on the same code and database as the server: the poll benchmark above asks for
    one version over and over, so after its first request per server process it reads the rendered section
    from the per-process fragment cache; this is what each new version costs once.
    """
    from django.core.cache import caches

    from rentals import progress

    times = []
    for _ in range(samples):
        caches[progress.FRAGMENT_CACHE].clear()
        fresh = type(rental).objects.get(pk=rental.pk)
        started = time.perf_counter()
        progress.section_html(fresh, may_act=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    phases = set(filter(None, args.only.split(","))) or {"submit", "engine", "poll", "pages", "search"}
    run_dir = Path(tempfile.mkdtemp(prefix="bench-"))
    procs = Processes(run_dir)
    scratch: ScratchPostgres | None = None
    result: dict[str, Any] = {"ok": False}

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(HARD_DEADLINE_SECONDS)  # whatever happens, the run ends and cleans up
    try:
        # Stack ------------------------------------------------------------------------------------------
        given_db = os.environ.get("DATABASE_URL", "")
        if given_db.startswith(("postgres://", "postgresql://", "pgsql://")):
            scratch = ScratchPostgres(given_db, args.db_name)
            scratch.create()
            db_url = scratch.url
        elif given_db:
            say(f"note: DATABASE_URL {given_db.split(':')[0]}:... is neither PostgreSQL nor SQLite; using SQLite")
            db_url = f"sqlite:///{run_dir / 'db.sqlite3'}"
        else:
            db_url = f"sqlite:///{run_dir / 'db.sqlite3'}"
        broker_url = os.environ.get("CELERY_BROKER_URL", "") or "filesystem://"
        os.environ.update(RUN_ENV)
        if args.fs_polling_interval is not None:
            os.environ["BENCH_FS_POLLING_INTERVAL"] = str(args.fs_polling_interval)
        os.environ.update({"RUN_DIR": str(run_dir), "DATABASE_URL": db_url, "CELERY_BROKER_URL": broker_url})

        sim_port, web_port = free_port(), free_port()
        sim_url = f"http://127.0.0.1:{sim_port}"
        web = f"http://127.0.0.1:{web_port}"
        os.environ["LIUM_BASE_URL"] = f"{sim_url}/api"
        child_env = dict(os.environ)

        import django

        django.setup()
        import httpx
        from django.conf import settings
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", interactive=False, verbosity=0)
        db_label = f"{connection.vendor} ({connection.settings_dict['NAME']})"
        if broker_url.startswith("filesystem://"):
            broker_label = f"embedded file-system transport ({run_dir / 'broker'})"
        else:
            broker_label = re.sub(r"//[^@/]*@", "//***@", broker_url)
            from dashboard.celery import app

            app.control.purge()
        cache_backend = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
        stack = {
            "database": connection.vendor,
            "database_name": str(connection.settings_dict["NAME"]),
            "embedded_default": connection.vendor == "sqlite" and broker_url.startswith("filesystem://"),
            "broker": broker_label,
            "cache": cache_backend,
            "web": f"gunicorn -c deploy/gunicorn.conf.py, {args.web_workers} workers x {args.web_threads} threads",
            "simulator": f"{args.fabrics} fabrics x {args.nodes_per_fabric} nodes, replenish, pod limiter off",
        }
        result["stack"] = stack
        result["machine"] = machine()
        say(f"database: {db_label}")
        say(f"broker:   {broker_label}")
        say(f"cache:    {cache_backend}")
        say(f"run dir:  {run_dir}")

        sim = procs.start(
            [
                sys.executable,
                "-m",
                "simulator",
                "--mode",
                "test",
                "--port",
                str(sim_port),
                "--start-seconds",
                "1",
                "--replenish",
                "--pods-rate-limit",
                "0",
                "--fabrics",
                str(args.fabrics),
                "--nodes-per-fabric",
                str(args.nodes_per_fabric),
            ],
            log_name="simulator.log",
            env=child_env,
        )
        wait_http(f"{sim_url}/api/version", sim)
        web_env = {
            **child_env,
            "WEB_CONCURRENCY": str(args.web_workers),
            "GUNICORN_THREADS": str(args.web_threads),
            "GUNICORN_BIND": f"127.0.0.1:{web_port}",
            "GUNICORN_LOG_LEVEL": "warning",
            # Recycling would reset the peak memory figure and add restarts to the load runs.
            "GUNICORN_MAX_REQUESTS": "0",
            # One user submits 200 rentals in a few minutes here: the per-user limit is not measured.
            "RENT_SUBMIT_RATE_PER_MINUTE": "100000",
        }
        gunicorn = procs.start(
            [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py"], log_name="gunicorn.log", env=web_env
        )
        wait_http(f"{web}/healthz", gunicorn)
        say(f"simulator {sim_url}, gunicorn {web} (pid {gunicorn.pid})")

        # People -------------------------------------------------------------------------------------------
        from django.contrib.auth.models import User

        from accounts.models import Customer, Membership, UpstreamCredential
        from rentals import offers
        from rentals.models import ClusterMember, Rental, RentAttempt
        from rentals.services import RentOrder, build_request_body, rental_submit
        from rentals.tasks import sqlite_analyze

        credential = UpstreamCredential(name="bench", base_url=f"{sim_url}/api")
        credential.set_secret(SIM_KEY)
        credential.save()
        customer = Customer.objects.create(name="Bench Research", customer_ref="bench", default_credential=credential)
        alice = User.objects.create_user("bench-alice", "alice@bench.invalid", PASSWORD)
        Membership.objects.create(user=alice, customer=customer)
        User.objects.create_superuser("bench-admin", "admin@bench.invalid", PASSWORD)

        def login(username: str) -> httpx.Client:
            client = httpx.Client(base_url=web, timeout=30.0)
            client.get("/accounts/login/")
            response = client.post(
                "/accounts/login/",
                data={
                    "username": username,
                    "password": PASSWORD,
                    "csrfmiddlewaretoken": client.cookies.get("csrftoken", ""),
                },
            )
            if response.status_code != 302:
                raise RuntimeError(f"login as {username} failed: {response.status_code}")
            return client

        def cookie_header(client: httpx.Client) -> str:
            return "; ".join(f"{name}={value}" for name, value in client.cookies.items())

        user_http = login("bench-alice")
        staff_http = login("bench-admin")
        sim_http = httpx.Client(base_url=sim_url, timeout=30.0, headers={"X-API-Key": SIM_KEY})

        used: set[str] = set()

        def node_pairs(count: int) -> list[tuple[str, list[str]]]:
            """Pairs of free, whole, unused nodes on one fabric, from the simulator's current listing."""
            pairs: list[tuple[str, list[str]]] = []
            for offer in sim_http.get("/api/executors/infiniband-clusters").raise_for_status().json():
                free = [
                    n["id"]
                    for n in offer["nodes"]
                    if n["id"] not in used and n.get("available_gpu_count", n.get("gpu_count")) == n.get("gpu_count")
                ]
                for i in range(0, len(free) - 1, 2):
                    pairs.append((offer["fabric_id"], free[i : i + 2]))
            pairs = pairs[:count]
            if len(pairs) < count:
                raise RuntimeError(f"the simulator offers only {len(pairs)} free node pairs, {count} needed")
            for _fabric, ids in pairs:
                used.update(ids)
            return pairs

        template_id = offers.cluster_templates(credential=credential)[0].id

        def sim_receipts() -> dict[str, float]:
            """Idempotency key -> when the simulator first received a rent call with it (epoch seconds)."""
            from simulator.clock import parse_iso

            rows = sim_http.get("/_sim/requests").raise_for_status().json()
            rows = rows["requests"] if isinstance(rows, dict) else rows
            first: dict[str, float] = {}
            for row in rows:
                key = row.get("idempotency_key")
                if key and key not in first:
                    first[key] = parse_iso(row["at"])
            return first

        def direct_rent(fabric_id: str, ids: list[str], index: int) -> tuple[str, float, float]:
            """One rent call straight to the simulator with the dashboard's body: (key, t0 epoch, round trip ms)."""
            body = build_request_body(
                RentOrder(
                    fabric_id=fabric_id,
                    executor_ids=ids,
                    pod_name=f"direct-{index}",
                    public_keys=[SSH_KEY],
                    template_id=template_id,
                )
            )
            key = str(uuid.uuid4())
            with httpx.Client(base_url=sim_url, timeout=30.0) as client:  # a new connection, as the worker's
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

        workers = Workers(procs, child_env)
        summary: list[tuple[str, str]] = []

        # 1. Submit-to-upstream latency ---------------------------------------------------------------------
        if "submit" in phases:
            n = args.submit_rentals
            say(f"\n[1] submit-to-upstream latency: {n} rentals through the rent form, one at a time")
            workers.start(2)
            pairs = node_pairs(n)
            posts: list[tuple[str, float, float]] = []  # public_id, t0 epoch, POST ms
            form_errors = 0
            # The form's CSRF cookie comes with the rent page.
            user_http.get("/rent/", params={"fabric": pairs[0][0]})
            submit_deadline = time.monotonic() + args.submit_budget
            for index, (fabric_id, ids) in enumerate(pairs):
                if time.monotonic() > submit_deadline:
                    say(f"    budget of {args.submit_budget:g} s reached after {index} rentals")
                    break
                data = {
                    "csrfmiddlewaretoken": user_http.cookies.get("csrftoken", ""),
                    "fabric": fabric_id,
                    "customer": str(customer.pk),
                    "executor_ids": ids,
                    "pod_name": f"bench-{index}",
                    "ssh_public_keys": SSH_KEY,
                    "template_id": template_id,
                    "enable_volume_encryption": "on",
                    "enable_backups": "on",
                    "submit_token": str(uuid.uuid4()),
                }
                t0 = time.time()
                p0 = time.perf_counter()
                response = user_http.post(f"/rent/?fabric={fabric_id}", data=data)
                post_ms = (time.perf_counter() - p0) * 1000
                match = re.search(r"/rentals/([0-9a-f-]{36})/", response.headers.get("location", ""))
                if response.status_code != 302 or not match:
                    form_errors += 1
                    continue
                public_id = match.group(1)
                posts.append((public_id, t0, post_ms))
                # One at a time: wait until the worker has made the call, so no rental queues behind another.
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    status = Rental.objects.filter(public_id=public_id).values_list("status", flat=True).first()
                    if status not in ("queued", "sending"):
                        break
                    time.sleep(0.005)
            workers.sample_memory()
            receipts = sim_receipts()
            keys = dict(
                Rental.objects.filter(public_id__in=[p for p, _, _ in posts]).values_list(
                    "public_id", "idempotency_key"
                )
            )
            latencies = []
            post_times = []
            for public_id, t0, post_ms in posts:
                key = str(keys.get(uuid.UUID(public_id)))
                if key in receipts:
                    latencies.append((receipts[key] - t0) * 1000)
                    post_times.append(post_ms)
            say(f"    direct reference: {n} httpx POSTs of the same body to the simulator")
            direct_lat, direct_rtt = [], []
            direct_keys = []
            for index, (fabric_id, ids) in enumerate(node_pairs(n)):
                key, t0, rtt = direct_rent(fabric_id, ids, index)
                direct_keys.append((key, t0))
                direct_rtt.append(rtt)
            receipts = sim_receipts()
            direct_lat = [(receipts[key] - t0) * 1000 for key, t0 in direct_keys if key in receipts]
            d50, d99 = pct(latencies, 50), pct(latencies, 99)
            r50, r99 = pct(direct_lat, 50), pct(direct_lat, 99)
            result["submit"] = {
                "broker": broker_label,
                "rentals": len(latencies),
                "requested": n,
                "form_errors": form_errors,
                "budget_reached": len(posts) + form_errors < n,
                "p50_ms": r(d50),
                "p99_ms": r(d99),
                "mean_ms": r(statistics.fmean(latencies) if latencies else None),
                "post_response_p50_ms": r(pct(post_times, 50)),
                "post_response_p99_ms": r(pct(post_times, 99)),
                "direct_p50_ms": r(r50),
                "direct_p99_ms": r(r99),
                "direct_roundtrip_p50_ms": r(pct(direct_rtt, 50)),
                "direct_roundtrip_p99_ms": r(pct(direct_rtt, 99)),
                "overhead_p50_ms": r(d50 - r50) if d50 is not None and r50 is not None else None,
                "overhead_p99_ms": r(d99 - r99) if d99 is not None and r99 is not None else None,
                "ratio_p50": r(d50 / max(r50, 1.0)) if d50 is not None and r50 is not None else None,
                "ratio_p50_vs_roundtrip": r(d50 / pct(direct_rtt, 50)) if d50 is not None and direct_rtt else None,
                "clock": "simulator GET /_sim/requests `at` (wall clock, ms) minus client time.time() before the POST",
            }
            s = result["submit"]
            say(
                f"    dashboard p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms (POST answered p50 "
                f"{s['post_response_p50_ms']} ms); direct p50 {s['direct_p50_ms']} ms "
                f"(round trip {s['direct_roundtrip_p50_ms']} ms); overhead p50 {s['overhead_p50_ms']} ms"
            )
            summary.append(("submit p50 / p99 (ms)", f"{s['p50_ms']} / {s['p99_ms']}"))
            summary.append(("submit overhead p50 (ms), ratio", f"{s['overhead_p50_ms']}, x{s['ratio_p50']}"))

        # 5. Engine throughput -------------------------------------------------------------------------------
        if "engine" in phases:
            n = args.engine_rentals
            result["engine"] = {"rentals_per_run": n, "runs": []}
            say(f"\n[5] engine throughput: {n} rentals per run, settled = a state the engine does not leave")
            for count in [int(c) for c in args.engine_workers.split(",") if c.strip()]:
                workers.start(count)
                pairs = node_pairs(n)
                t_start = time.monotonic()
                ids = []
                for index, (fabric_id, node_ids) in enumerate(pairs):
                    rental = rental_submit(
                        user=alice,
                        customer=customer,
                        customer_ref="bench",
                        order=RentOrder(
                            fabric_id=fabric_id,
                            executor_ids=node_ids,
                            pod_name=f"engine-{count}-{index}",
                            public_keys=[SSH_KEY],
                            template_id=template_id,
                        ),
                    )
                    ids.append(rental.pk)
                deadline = time.monotonic() + args.engine_budget
                settled = 0
                while time.monotonic() < deadline:
                    settled = Rental.objects.filter(pk__in=ids, status__in=SETTLED).count()
                    if settled == len(ids):
                        break
                    time.sleep(0.02)
                elapsed = time.monotonic() - t_start
                workers.sample_memory()
                confirmed = Rental.objects.filter(pk__in=ids, status__in=("rented", "ready")).count()
                # Reference: the same rent calls straight to the simulator, `count` at a time.
                ref_pairs = node_pairs(n)
                t_ref = time.monotonic()
                lock = threading.Lock()
                queue = list(enumerate(ref_pairs))

                def sender(lock: threading.Lock = lock, queue: list = queue) -> None:
                    while True:
                        with lock:
                            if not queue:
                                return
                            index, (fabric_id, node_ids) = queue.pop()
                        direct_rent(fabric_id, node_ids, 100000 + index)

                threads = [threading.Thread(target=sender) for _ in range(count)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                ref_elapsed = time.monotonic() - t_ref
                rate = settled / elapsed
                ref_rate = n / ref_elapsed
                run = {
                    "workers": count,
                    "settled": settled,
                    "confirmed": confirmed,
                    "seconds": r(elapsed),
                    "rentals_per_s": r(rate),
                    "direct_per_s": r(ref_rate),
                    "ratio": r(rate / ref_rate, 3),
                }
                result["engine"]["runs"].append(run)
                say(
                    f"    {count} worker process(es): {rate:.1f} rentals/s ({settled}/{n} settled, {confirmed} "
                    f"confirmed, {elapsed:.1f} s); direct x{count}: {ref_rate:.1f}/s; ratio {rate / ref_rate:.3f}"
                )
                summary.append((f"engine {count} worker(s) rentals/s (ratio)", f"{rate:.1f} (x{rate / ref_rate:.3f})"))
        workers.stop()
        result["memory"] = {
            "celery_pool_peak_rss_mb": workers.peak_pool_mb or None,
            "celery_main_peak_rss_mb": workers.peak_main_mb or None,
        }

        # 2. Poll cost ---------------------------------------------------------------------------------------
        if "poll" in phases:
            wrk = ensure_wrk(args.load_tool)
            tool = "wrk" if wrk else "python-httpx-asyncio"
            say(
                f"\n[2] poll cost: {args.poll_clients} clients, {args.poll_seconds:g} s per run, "
                f"{args.poll_rounds} rounds, {tool}"
            )
            now = datetime.now(UTC)
            rental = rental_submit(
                user=alice,
                customer=customer,
                customer_ref="bench",
                order=RentOrder(
                    fabric_id="poll-fabric",
                    executor_ids=["poll-a", "poll-b", "poll-c", "poll-d"],
                    pod_name="poll-bench",
                    public_keys=[SSH_KEY],
                    template_id=template_id,
                ),
            )
            # In flight: rented, two members running and two starting, one confirmed attempt (no worker runs).
            Rental.objects.filter(pk=rental.pk).update(
                status="rented",
                attempt_count=1,
                first_sent_at=now,
                last_sent_at=now,
                cluster_id="poll-cluster",
                version=3,
            )
            RentAttempt.objects.create(
                rental=rental,
                number=1,
                started_at=now,
                duration_ms=40,
                http_status=200,
                classification="confirmed",
                request_id="req_poll",
            )
            for rank in range(4):
                running = rank < 2
                ClusterMember.objects.create(
                    rental=rental,
                    pod_id=f"poll-pod-{rank}",
                    rank=rank,
                    overlay_ip=f"10.42.0.{rank + 1}",
                    status="RUNNING" if running else "PENDING",
                    phase="" if running else "pulling_image",
                    eta_seconds=None if running else 20,
                    ssh_command=f"ssh root@198.18.0.{rank} -p 22" if running else "",
                    executor_id=f"poll-{'abcd'[rank]}",
                    price_per_hour="17",
                    gpu_count=8,
                    running_since=now if running else None,
                )
            base = f"{web}/rentals/{rental.public_id}/progress/"
            cookie = cookie_header(user_http)
            # Every poll is exactly what an open page asks: the URL in its poller (the version it shows, its
            # interval and its signed token), taken from the page as htmx takes it.
            page = user_http.get(f"{web}/rentals/{rental.public_id}/").text
            poller = re.search(r'<div id="poller" hx-get="([^"]+)"', page)
            if poller is None:
                raise RuntimeError("the rental page has no poller")
            progress_url = web + poller.group(1).replace("&amp;", "&")
            # Then the rental changes as the engine's member sync changes it: the third member starts running
            # (a new version). The page's next poll gets the new progress section and a new poller.
            ClusterMember.objects.filter(rental=rental, rank=2).update(
                status="RUNNING", phase="", eta_seconds=None, ssh_command="ssh root@198.18.0.2 -p 22", running_since=now
            )
            Rental.objects.filter(pk=rental.pk).update(version=4)
            changed = user_http.get(progress_url).text
            if 'hx-swap-oob="true"' not in changed or "Nodes starting 3/4" not in changed:
                raise RuntimeError("the poll after a change did not bring the new progress section")
            poller = re.search(r'<div id="poller" hx-get="([^"]+)"', changed)
            if poller is None:
                raise RuntimeError("the progress answer has no poller")
            unchanged = web + poller.group(1).replace("&amp;", "&")
            # Without the token (first poll of a new session, or a token past its 5 minutes): the full check.
            checked = f"{base}?v=3&i=2.0"
            targets = {
                "trivial": f"{web}/bench/trivial/",
                "progress": progress_url,
                "progress_unchanged": unchanged,
                "progress_checked": checked,
            }
            for name, url in targets.items():  # each answers 200 before it is loaded
                code = user_http.get(url).status_code
                if code != 200:
                    raise RuntimeError(f"{name} {url} answered {code}")
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
            for _round in range(args.poll_rounds):
                for name, url in targets.items():
                    if wrk:
                        figures = load_wrk(wrk, url, cookie, args.poll_clients, args.poll_seconds)
                    else:
                        figures = load_python(url, cookie, args.poll_clients, args.poll_seconds)
                    runs[name].append(figures)
                    say(
                        f"    {name:19s} {figures['rps']:8.1f} req/s  p99 {figures['p99_ms']} ms"
                        f"  (non-2xx {figures['non_2xx']})"
                    )
            poll: dict[str, Any] = {"tool": tool, "clients": args.poll_clients, "seconds_per_run": args.poll_seconds}
            for name, items in runs.items():
                poll[f"{name}_rps"] = r(statistics.fmean(item["rps"] for item in items), 1)
                poll[f"{name}_p99_ms"] = r(max(item["p99_ms"] for item in items))
                poll[f"{name}_p50_ms"] = r(statistics.median(item["p50_ms"] for item in items if item["p50_ms"]))
                poll[f"{name}_errors"] = sum(item["non_2xx"] for item in items)
            # Each round measures the trivial view just before the polls, so a ratio compares runs seconds apart;
            # the median over rounds keeps one noisy run (a neighbour's burst on a shared host) from deciding it.
            for key, name in (
                ("ratio", "progress"),
                ("ratio_unchanged", "progress_unchanged"),
                ("ratio_checked", "progress_checked"),
            ):
                per_round = [run["rps"] / base["rps"] for run, base in zip(runs[name], runs["trivial"], strict=True)]
                poll[key] = r(statistics.median(per_round), 3)
                poll[f"{key}_rounds"] = [r(value, 3) for value in per_round]
            poll["rounds"] = args.poll_rounds
            poll["section_render_ms"] = r(section_render_ms(rental))
            poll["goal_ratio"] = 0.6
            poll["meets_goal"] = poll["ratio"] >= 0.6
            # What an open page sends while its rental has not changed (most polls): the not-modified shortcut.
            poll["meets_goal_unchanged"] = poll["ratio_unchanged"] >= 0.6
            result["poll"] = poll
            summary.append(
                (
                    "poll progress / trivial req/s",
                    f"{poll['progress_rps']} / {poll['trivial_rps']} (ratio {poll['ratio']})",
                )
            )
            summary.append(
                ("poll unchanged req/s (ratio)", f"{poll['progress_unchanged_rps']} ({poll['ratio_unchanged']})")
            )
            summary.append(
                ("poll checked (no token) req/s (ratio)", f"{poll['progress_checked_rps']} ({poll['ratio_checked']})")
            )
            summary.append(
                (
                    "poll p99 progress / unchanged / checked / trivial (ms)",
                    f"{poll['progress_p99_ms']} / {poll['progress_unchanged_p99_ms']} / "
                    f"{poll['progress_checked_p99_ms']} / {poll['trivial_p99_ms']}",
                )
            )
            summary.append(("progress section render, uncached (ms)", f"{poll['section_render_ms']}"))

        # 3 + 4. Page cost and support search at scale ------------------------------------------------------
        ops_present = _ops_present()
        result["ops"] = "present" if ops_present is True else f"skipped: {ops_present}"
        page_sizes = parse_sizes(args.page_rows) if "pages" in phases else []
        pg = connection.vendor == "postgresql"
        search_sizes = parse_sizes(args.search_rows) if "search" in phases and pg else []
        if "search" in phases and not pg:
            result["search"] = {
                "skipped": "support search is measured on PostgreSQL only; DATABASE_URL is not "
                "PostgreSQL (run with DATABASE_URL=postgres://...)"
            }
        elif "search" in phases and ops_present is not True:
            result["search"] = {"skipped": f"ops is not installed ({ops_present})"}
            search_sizes = []
        if page_sizes:
            result["pages"] = {"samples": args.page_samples, "sizes": {}}
        if search_sizes:
            result["search"] = {"samples_per_kind": args.search_samples, "sizes": {}}
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        in_process = {"user": Client(), "staff": Client()}
        in_process["user"].force_login(alice)
        in_process["staff"].force_login(User.objects.get(username="bench-admin"))
        samples: dict[str, list[str]] = {
            k: []
            for k in (
                "rental id",
                "idempotency key",
                "pod id",
                "cluster id",
                "executor id",
                "request id",
                "pod name",
                "customer ref",
            )
        }
        tenants = bench_tenants(credential) if page_sizes or search_sizes else []
        have = Rental.objects.count()
        next_id = (Rental.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1000
        for size in sorted(set(page_sizes) | set(search_sizes)):
            target_extra = size - have
            if target_extra > 0:
                say(f"\n    inserting {target_extra} rentals (to {size}) ...")
                t0 = time.monotonic()
                step = 100_000
                for offset in range(0, target_extra, step):
                    chunk = min(step, target_extra - offset)
                    bulk_rentals(
                        start=next_id,
                        count=chunk,
                        customer=customer,
                        credential=credential,
                        user=alice,
                        samples=samples,
                        tenants=tenants,
                    )
                    next_id += chunk
                have = Rental.objects.count()
                say(f"    {have} rentals now ({time.monotonic() - t0:.1f} s)")
                # The hourly beat task a running dashboard has done by the time it holds this many rentals.
                if sqlite_analyze():
                    say("    SQLite statistics refreshed (rentals.tasks.sqlite_analyze, hourly in beat)")
            if size in page_sizes:
                say(f"\n[3] page cost at {size} rentals ({args.fabrics} x {args.nodes_per_fabric} fabrics)")
                # Page 100 of my rentals: the keyset cursor after the 2,475th newest row, as the "Older"
                # links would reach it.
                deep = Rental.objects.filter(customer=customer).order_by("-created_at", "-id")[2474]
                cursor = quote(f"{deep.created_at.isoformat()}_{deep.pk}")
                pages = {
                    "fabric_list": ("user", "/fabrics/"),
                    "rental_list": ("user", "/rentals/"),
                    "rental_list_page_100": ("user", f"/rentals/?before={cursor}"),
                }
                if ops_present is True:
                    pages["ops_overview"] = ("staff", "/ops/")
                figures: dict[str, Any] = {}
                for name, (who, path) in pages.items():
                    http = user_http if who == "user" else staff_http
                    times = []
                    for _ in range(args.page_samples):
                        p0 = time.perf_counter()
                        response = http.get(path)
                        times.append((time.perf_counter() - p0) * 1000)
                        if response.status_code != 200:
                            raise RuntimeError(f"{path} answered {response.status_code}")
                    with CaptureQueriesContext(connection) as queries:
                        in_process[who].get(path)
                    figures[name] = {
                        "median_ms": r(statistics.median(times)),
                        "queries": len(queries),
                        "first_ms": r(times[0]),
                    }
                    say(f"    {name:22s} median {statistics.median(times):8.1f} ms   queries {len(queries)}")
                result["pages"]["sizes"][str(size)] = figures
            if size in search_sizes:
                say(f"\n[4] support search at {size} rentals (PostgreSQL)")
                kinds = {k: v for k, v in samples.items() if v}
                # One customer holding most rentals, one of 400, a prefix of ten (and of all 400: at most 20 read).
                kinds["customer"] = ["Bench Res", "Bench Tenant 123", "Bench Tenant 01", "Bench Tenant"]
                # The creator of most rentals; a tenant's user by name and by e-mail in another case.
                kinds["user"] = ["bench-alice", "bench-tenant-042", "ops+042@tenant042.invalid"]
                kinds["overlay IP"] = ["10.42.0.1", "10.42.0.2"]
                per_kind: dict[str, Any] = {}
                # The first search a web process answers also loads its code and templates: timed apart (as the
                # pages' first_ms), then two more warm-ups so that the samples measure the search itself.
                p0 = time.perf_counter()
                staff_http.get("/ops/search/", params={"q": "warm-up"})
                first_ms = (time.perf_counter() - p0) * 1000
                for _ in range(2):
                    staff_http.get("/ops/search/", params={"q": "warm-up"})
                for kind, values in kinds.items():
                    step = max(1, len(values) // args.search_samples)
                    chosen = (values[::step] * args.search_samples)[: args.search_samples]
                    times = []
                    for value in chosen:
                        p0 = time.perf_counter()
                        response = staff_http.get("/ops/search/", params={"q": value})
                        times.append((time.perf_counter() - p0) * 1000)
                        if response.status_code not in (200, 302):
                            raise RuntimeError(f"search {value!r} answered {response.status_code}")
                    per_kind[kind] = {"median_ms": r(statistics.median(times)), "p95_ms": r(pct(times, 95))}
                    say(f"    {kind:16s} median {statistics.median(times):7.1f} ms   p95 {pct(times, 95):7.1f} ms")
                worst = max(v["p95_ms"] for v in per_kind.values())
                result["search"]["sizes"][str(size)] = {
                    "kinds": per_kind,
                    "worst_p95_ms": worst,
                    "first_ms": r(first_ms),
                }
                summary.append((f"search worst p95 at {size} (ms)", str(worst)))
        if page_sizes:
            sizes = result["pages"]["sizes"]
            constant = all(
                len({sizes[str(s)][page]["queries"] for s in page_sizes}) == 1 for page in sizes[str(page_sizes[0])]
            )
            result["pages"]["queries_constant"] = constant
            for s in page_sizes:
                line = ", ".join(f"{name} {v['median_ms']} ms/{v['queries']}q" for name, v in sizes[str(s)].items())
                summary.append((f"pages at {s} rows", line))

        # 6. Memory -------------------------------------------------------------------------------------------
        web_workers = children_of(gunicorn.pid)
        result["memory"]["gunicorn_worker_peak_rss_mb"] = max((vm_hwm_mb(p) or 0 for p in web_workers), default=None)
        result["memory"]["gunicorn_workers"] = {str(p): vm_hwm_mb(p) for p in web_workers}
        result["memory"]["gunicorn_master_peak_rss_mb"] = vm_hwm_mb(gunicorn.pid)
        summary.append(
            (
                "peak RSS web worker / celery pool (MB)",
                f"{result['memory']['gunicorn_worker_peak_rss_mb']} / {result['memory']['celery_pool_peak_rss_mb']}",
            )
        )
        result["ok"] = True
        result["duration_s"] = r(time.monotonic() - started, 1)

        say("\n" + "=" * 100)
        say(f"stack: {stack['database']} | broker {stack['broker']} | cache {stack['cache']} | {stack['web']}")
        say(f"machine: {result['machine']['cpu']} x{result['machine']['cpus']}, {result['machine']['mem_gb']} GB")
        for label, value in summary:
            say(f"  {label:45s} {value}")
        say(f"  {'ops pages':45s} {result['ops']}")
        if isinstance(result.get("search"), dict) and "skipped" in result["search"]:
            say(f"  {'support search':45s} skipped: {result['search']['skipped']}")
        say(f"  {'duration (s)':45s} {result['duration_s']}")
        say("=" * 100)
        return 0
    except KeyboardInterrupt:
        result["error"] = "interrupted"
        return 1
    except Exception as exc:  # report, clean up, and still end with the JSON line
        import traceback

        traceback.print_exc()
        result["error"] = f"{type(exc).__name__}: {exc}"
        return 1
    finally:
        signal.alarm(0)
        procs.stop_all()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: S110 - Django may never have been set up
            pass
        if scratch is not None and not args.keep_db:
            try:
                scratch.drop()
            except Exception as exc:
                say(f"note: could not drop {scratch.name}: {exc}")
        if args.keep_run_dir or not result.get("ok"):
            say(f"run folder kept: {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        result.setdefault("duration_s", r(time.monotonic() - started, 1))
        print(json.dumps(result, default=str), flush=True)


def _ops_present() -> bool | str:
    """True when the operations pages exist (app installed, URLs and templates in place), else why not."""
    from django.conf import settings
    from django.template.exceptions import TemplateDoesNotExist
    from django.template.loader import get_template
    from django.urls import NoReverseMatch, reverse

    if "ops" not in settings.INSTALLED_APPS:
        return "the ops app is not in INSTALLED_APPS"
    try:
        reverse("ops:overview")
        reverse("ops:search")
    except NoReverseMatch:
        return "the ops URLs (ops_overview, ops_search) are not routed"
    try:
        get_template("ops/overview.html")
    except TemplateDoesNotExist:
        return "templates/ops/overview.html does not exist"
    return True


if __name__ == "__main__":
    sys.exit(main())
