#!/usr/bin/env python
"""Chaos run: rent through faults and killed workers, then check the database against the upstream's ledger.

    make chaos CHAOS_ARGS="--rentals 300 --seed 7"
    python scripts/chaos.py --rentals 50 --broker redis

It starts, in a fresh run folder, everything it needs and nothing shared:

- the Lium simulator with random faults on the rent route (latency, 429s, 5xx before and after the commit,
  dropped connections before and after the commit, slow commits longer than the client's timeout, and a
  small share of "outcome unknown" answers that may or may not have rented);
- its own database (SQLite in the run folder; with `DATABASE_URL`/`--database-url` pointing at PostgreSQL,
  a scratch database on that server, dropped at the end, unless `--database-as-is`);
- its own broker: the embedded file-system transport, or Redis (a private `redis-server` on a free port when
  the binary exists, restarted once mid-run; otherwise the given `CELERY_BROKER_URL`, not restarted);
- `--workers` real `celery worker` processes (exactly one also runs beat, hence the sweeper).

It submits rentals through `rentals.services.rental_submit` (the service behind the rent form), SIGKILLs
worker process groups at random moments and starts replacements, waits until every rental has settled
(a state the engine does not leave by itself), then compares every rental with the simulator's ledger and
request log. The last line of output is one JSON object; the exit status is 1 when any of duplicates,
lost, untruthful or key_reused is above 0 (2 when the run could not be set up).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

SIM_KEY = "sim-demo-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ chaos@run"

# States the engine never leaves by itself (the rest — queued, sending, retrying — it moves on).
SETTLED_STATES = ("rented", "ready", "degraded", "refused", "failed", "unknown", "not_rented", "cancelled")
HOLDS_CLUSTER = ("rented", "ready", "degraded", "terminating", "terminated")
NOTHING_RENTED = ("refused", "failed", "not_rented", "cancelled")

# Fast knobs for every process of the run (the script's own Django too): short backoffs and leases, a
# client timeout shorter than the slowest injected commit (so that commit ends in a read timeout).
# A sweep every 2 s re-enqueueing `queued` rows only after 15 s: the sweeper re-sends every due row on
# every sweep, so shorter values flood a slow (embedded) queue with duplicate messages. The environment
# overrides any of these.
FAST_ENV = {
    "SWEEP_INTERVAL_SECONDS": "2",
    "RENT_QUEUED_STUCK_SECONDS": "15",
    "RENT_BACKOFF_BASE_SECONDS": "0.2",
    "RENT_BACKOFF_CAP_SECONDS": "2",
    "RENT_LEASE_SECONDS": "8",
    "LIUM_TIMEOUT_SECONDS": "3",
    "LIUM_CONNECT_TIMEOUT_SECONDS": "2",
    "RENT_MAX_ATTEMPTS": "8",
    "POD_POLL_MIN_INTERVAL_SECONDS": "2",
}


def fault_rules(seed: int, scale: float) -> dict[str, Any]:
    """Return the simulator's fault rule set; `scale` multiplies every probability."""

    def p(value: float) -> float:
        return round(min(1.0, value * scale), 4)

    return {
        "seed": seed,
        "rules": [
            {"fault": "latency", "probability": p(0.35), "ms": [20, 400]},
            {"fault": "rate_limit", "probability": p(0.07), "retry_after": 1},
            {"fault": "error_before_commit", "probability": p(0.07), "status": 503},
            {"fault": "drop_before_commit", "probability": p(0.03)},
            # Longer than LIUM_TIMEOUT_SECONDS: the client gives up, the commit happens after all.
            {"fault": "slow_commit", "probability": p(0.04), "seconds": 4.5},
            {"fault": "slow_commit", "probability": p(0.04), "seconds": 1.5},
            {"fault": "outcome_unknown", "probability": p(0.01), "commit": 0.5},
            {"fault": "error_after_commit", "probability": p(0.10), "status": 502},
            {"fault": "drop_after_commit", "probability": p(0.06)},
        ],
    }


# --- Small helpers -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def say(message: str) -> None:
    print(message, flush=True)


def elapsed(start: float) -> str:
    return f"{time.monotonic() - start:6.1f}s"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/chaos.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--rentals", type=int, default=300, help="how many rentals to submit")
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000, help="seed for faults, nodes and kills")
    p.add_argument("--workers", type=int, default=2, help="worker processes running at once (one runs beat)")
    p.add_argument("--concurrency", type=int, default=4, help="pool processes per worker")
    p.add_argument("--timeout", type=float, default=480, help="seconds to wait for every rental to settle")
    p.add_argument("--kill-every", type=float, default=8.0, help="mean seconds between worker SIGKILLs (0: none)")
    p.add_argument("--min-kills", type=int, default=3, help="kill sooner while rentals are in flight until this many")
    p.add_argument("--submit-rate", type=float, default=4.0, help="rentals submitted per second")
    p.add_argument("--fault-scale", type=float, default=1.0, help="multiplies every fault probability (0: none)")
    p.add_argument(
        "--broker",
        choices=["auto", "embedded", "redis"],
        default="auto",
        help="auto: Redis when CELERY_BROKER_URL is redis://, else the embedded file-system broker",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="default: a SQLite file in the run folder; PostgreSQL gets a scratch database",
    )
    p.add_argument(
        "--database-as-is",
        action="store_true",
        help="use --database-url's database itself (migrate, then delete only this run's rows)",
    )
    p.add_argument("--run-dir", default="", help="run folder (default: a new temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the run folder (it is always kept on failure)")
    p.add_argument("--explain", type=int, default=5, help="print the history of this many bad rentals")
    args = p.parse_args(argv)
    if args.rentals < 1 or args.workers < 1:
        p.error("--rentals and --workers must be at least 1")
    return args


# --- Processes -----------------------------------------------------------------------------------------


class Processes:
    """Every child process of the run, each in its own session so a kill takes its whole group."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.children: list[subprocess.Popen] = []

    def start(self, args: list[str], *, log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.run_dir / log_name, "ab")  # noqa: SIM115 - kept open for the child's life
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and redis-server, fixed arguments
            args,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()  # the child holds its own copy
        self.children.append(process)
        return process

    @staticmethod
    def kill(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)

    def stop_all(self) -> None:
        """Stop every child still running: SIGTERM, a short grace, then SIGKILL (also their groups)."""
        live = [proc for proc in self.children if proc.poll() is None]
        for proc in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 8
        for proc in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in live:
            # Also SIGKILL the group when its leader has just exited: a pool child may linger in it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(timeout=5)


def wait_for_port(port: int, *, process: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


class Redis:
    """A private redis-server on a free port, without persistence (a restart loses every message)."""

    def __init__(self, procs: Processes, binary: str) -> None:
        self.procs = procs
        self.binary = binary
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = self.procs.start(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            log_name="redis.log",
        )
        wait_for_port(self.port, process=self.process)

    def restart(self) -> float:
        """SIGKILL the server, wait a moment, start it again on the same port; return seconds it was down."""
        assert self.process is not None
        down = time.monotonic()
        self.procs.kill(self.process)
        time.sleep(1.5)
        self.start()
        return time.monotonic() - down


class Workers:
    """`--workers` celery worker processes; slot 0 also runs beat (beat must be single)."""

    def __init__(self, procs: Processes, *, count: int, concurrency: int, env: dict[str, str], run_dir: Path) -> None:
        self.procs = procs
        self.concurrency = concurrency
        self.env = env
        self.run_dir = run_dir
        self.slots: list[subprocess.Popen | None] = [None] * count
        self.started = 0
        self.kills = 0
        self.beat_kills = 0

    def start(self, slot: int) -> None:
        args = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "dashboard",
            "worker",
            "--loglevel=INFO",
            f"--concurrency={self.concurrency}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--hostname=chaos{slot}-{self.started}@%h",
        ]
        if slot == 0:
            args += ["--beat", f"--schedule={self.run_dir / 'beat-schedule'}"]
        self.slots[slot] = self.procs.start(args, log_name=f"worker-{slot}.log", env=self.env)
        self.started += 1

    def start_all(self) -> None:
        for slot in range(len(self.slots)):
            self.start(slot)

    def kill(self, slot: int) -> None:
        """SIGKILL the worker's whole process group (main process and pool children)."""
        process = self.slots[slot]
        if process is not None:
            with open(self.run_dir / f"worker-{slot}.log", "ab") as log:
                log.write(f"\n===== chaos: SIGKILL at {time.strftime('%H:%M:%S')} =====\n".encode())
            self.procs.kill(process, signal.SIGKILL)
        self.kills += 1
        if slot == 0:
            self.beat_kills += 1

    def check_alive(self) -> list[int]:
        """Restart any worker that died by itself; return their slots."""
        dead = [slot for slot, proc in enumerate(self.slots) if proc is not None and proc.poll() is not None]
        for slot in dead:
            self.start(slot)
        return dead


# --- Database ------------------------------------------------------------------------------------------


class ScratchPostgres:
    """A dedicated database on the given PostgreSQL server, created for this run and dropped after it."""

    def __init__(self, url: str, name: str) -> None:
        self.admin_url = url
        self.name = name
        parts = urlsplit(url)
        self.url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))

    def _execute(self, sql: str) -> None:
        import psycopg

        admin = urlsplit(self.admin_url)
        conninfo = urlunsplit(("postgresql", admin.netloc, admin.path or "/postgres", admin.query, ""))
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def create(self) -> None:
        self._execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


# --- The run -------------------------------------------------------------------------------------------


class Offers:
    """Picks free nodes, never one already given to an earlier rental of this run."""

    def __init__(self, sim_url: str, rng: random.Random) -> None:
        import httpx

        self.http = httpx.Client(base_url=sim_url, timeout=10.0, headers={"X-API-Key": SIM_KEY})
        self.rng = rng
        self.used: set[str] = set()
        self.pool: dict[str, list[dict[str, Any]]] = {}
        self.fetched_at = 0.0

    def refresh(self) -> None:
        offers = self.http.get("/api/executors/infiniband-clusters").raise_for_status().json()
        pool: dict[str, list[dict[str, Any]]] = {}
        for offer in offers:
            nodes = [
                node
                for node in offer.get("nodes", [])
                if node["id"] not in self.used
                and node.get("available_gpu_count", node.get("gpu_count")) == node.get("gpu_count")
            ]
            pool[offer["fabric_id"]] = nodes
        self.pool = pool
        self.fetched_at = time.monotonic()

    def pick(self, size: int) -> tuple[str, list[dict[str, Any]]] | None:
        """Return a fabric id and `size` distinct unused whole nodes on it, or None when none are free."""
        for refreshed in (False, True):
            if refreshed or time.monotonic() - self.fetched_at > 3:
                self.refresh()
            fabrics = sorted(fabric for fabric, nodes in self.pool.items() if len(nodes) >= size)
            if fabrics:
                fabric = self.rng.choice(fabrics)
                nodes = self.rng.sample(self.pool[fabric], size)
                for node in nodes:
                    self.used.add(node["id"])
                    self.pool[fabric].remove(node)
                return fabric, nodes
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    rng = random.Random(args.seed)  # noqa: S311 - reproducible chaos, not crypto
    run_dir = Path(args.run_dir).resolve() if args.run_dir else Path(tempfile.mkdtemp(prefix="chaos-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    procs = Processes(run_dir)
    scratch: ScratchPostgres | None = None
    cleanup_rows = None
    ok = False

    def on_sigterm(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        # Broker ---------------------------------------------------------------------------------------
        given_broker = os.environ.get("CELERY_BROKER_URL", "")
        broker = args.broker
        if broker == "auto":
            broker = "redis" if given_broker.startswith(("redis://", "rediss://")) else "embedded"
        redis: Redis | None = None
        if broker == "redis":
            binary = shutil.which("redis-server") or next(
                (path for path in ("/usr/bin/redis-server", "/usr/local/bin/redis-server") if Path(path).exists()), ""
            )
            if binary:
                redis = Redis(procs, binary)
                redis.start()
                broker_url = redis.url
            elif given_broker.startswith(("redis://", "rediss://")):
                broker_url = given_broker
                say(f"note: no redis-server binary; using {broker_url} as is and skipping the Redis restart")
            else:
                say("error: --broker redis needs a redis-server binary or CELERY_BROKER_URL=redis://...")
                return 2
        else:
            broker_url = "filesystem://"

        # Database -------------------------------------------------------------------------------------
        db_url = args.database_url
        if not db_url:
            db_url = f"sqlite:///{run_dir / 'db.sqlite3'}"
        elif db_url.startswith(("postgres://", "postgresql://")) and not args.database_as_is:
            scratch = ScratchPostgres(db_url, f"chaos_{args.seed}_{os.getpid()}")
            scratch.create()
            db_url = scratch.url

        # Environment for this process and every child, set before Django reads its settings.
        for name, value in FAST_ENV.items():
            os.environ.setdefault(name, value)  # a knob set in the environment wins
        os.environ.update(
            {
                "RUN_DIR": str(run_dir),
                "DATABASE_URL": db_url,
                "CELERY_BROKER_URL": broker_url,
                "DJANGO_SETTINGS_MODULE": "dashboard.settings",
                "PYTHONUNBUFFERED": "1",
            }
        )
        child_env = {**os.environ, "LOG_LEVEL": "INFO"}
        # This process only submits and reads: keep its console for the progress lines (an enqueue that
        # fails while Redis restarts is expected and recovered by the sweeper).
        os.environ["LOG_LEVEL"] = "ERROR"

        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from django.db.models import Count

        call_command("migrate", interactive=False, verbosity=0)
        if broker == "embedded":
            say(f"broker: embedded file-system transport in {run_dir / 'broker'}")
        else:
            say(f"broker: {broker_url}" + (" (private redis-server, restarted once mid-run)" if redis else ""))
        say(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
        say(f"run folder: {run_dir}   seed: {args.seed}")

        # Simulator ------------------------------------------------------------------------------------
        sim_port = free_port()
        faults = fault_rules(args.seed, args.fault_scale)
        nodes_needed = args.rentals * 4
        fabrics = 8
        nodes_per_fabric = max(32, min(128, nodes_needed // fabrics))
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
                "--seed",
                str(args.seed),
                "--fabrics",
                str(fabrics),
                "--nodes-per-fabric",
                str(nodes_per_fabric),
                "--faults",
                json.dumps(faults),
            ],
            log_name="simulator.log",
            env=child_env,
        )
        wait_for_port(sim_port, process=sim)
        sim_url = f"http://127.0.0.1:{sim_port}"
        say(
            f"simulator: {sim_url} ({fabrics} fabrics x {nodes_per_fabric} nodes, replenished), faults: "
            + ", ".join(f"{r['fault']} {r['probability']:.0%}" for r in faults["rules"])
        )

        # Who rents ------------------------------------------------------------------------------------
        from django.contrib.auth.models import User

        from accounts.models import Customer, Membership, UpstreamCredential
        from rentals.models import Heartbeat, Rental, RentalEvent, RentAttempt
        from rentals.services import RentOrder, rental_submit

        tag = f"chaos-{args.seed}-{os.getpid()}"
        credential = UpstreamCredential(name=tag, base_url=f"{sim_url}/api")
        credential.set_secret(SIM_KEY)
        credential.save()
        customer = Customer.objects.create(name=tag, customer_ref=tag, default_credential=credential)
        user = User.objects.create_user(tag, f"{tag}@example.invalid", None)
        Membership.objects.create(user=user, customer=customer)

        def delete_rows() -> None:
            Rental.objects.filter(customer=customer).delete()
            Heartbeat.objects.filter(name=f"pods:{credential.pk}").delete()
            Membership.objects.filter(customer=customer).delete()
            customer.delete()
            credential.delete()
            user.delete()

        if args.database_url and args.database_as_is:
            cleanup_rows = delete_rows

        # Workers --------------------------------------------------------------------------------------
        workers = Workers(procs, count=args.workers, concurrency=args.concurrency, env=child_env, run_dir=run_dir)
        workers.start_all()
        say(f"workers: {args.workers} x concurrency {args.concurrency} (worker 0 runs beat)")

        offers = Offers(sim_url, rng)
        rental_ids: list[int] = []
        submit_errors = 0
        submit_interval = 1.0 / args.submit_rate if args.submit_rate > 0 else 0.0
        next_submit = time.monotonic()
        kill_every = args.kill_every
        # The first --min-kills kills are planned inside the submission window, so even a run whose
        # rentals settle as fast as they arrive has its workers killed while it works.
        submit_window = args.rentals / args.submit_rate if args.submit_rate > 0 else 5.0
        planned: list[float] = []
        if kill_every > 0:
            spacing = max(1.0, 0.8 * submit_window / max(1, args.min_kills))
            planned = [
                time.monotonic() + 1.0 + i * spacing + rng.uniform(0, spacing * 0.8) for i in range(args.min_kills)
            ]
        next_kill = planned.pop(0) if planned else float("inf")
        redis_restart_at = max(1, args.rentals // 2) if redis else None
        redis_down_seconds = 0.0
        deadline = time.monotonic() + args.timeout
        last_progress = 0.0
        counts: Counter[str] = Counter()
        crashed_restarts = 0

        say(f"submitting {args.rentals} rentals at {args.submit_rate:g}/s; SIGKILL a worker every ~{kill_every:g}s")
        while True:
            now = time.monotonic()
            # Submit what is due.
            while len(rental_ids) < args.rentals and now >= next_submit:
                index = len(rental_ids)
                size = rng.choice((2, 2, 2, 3, 4))
                picked = offers.pick(size) or offers.pick(2)
                if picked is None:
                    say("no free nodes left; waiting for the simulator to replenish")
                    next_submit = now + 1
                    break
                fabric_id, nodes = picked
                order = RentOrder(
                    fabric_id=fabric_id,
                    executor_ids=[node["id"] for node in nodes],
                    pod_name=f"chaos-{index:04d}",
                    public_keys=[SSH_KEY],
                    gpu_type=str(nodes[0].get("gpu_type") or ""),
                    gpus_per_node=int(nodes[0].get("gpu_count") or 0),
                )
                try:
                    rental = rental_submit(
                        user=user,
                        customer=customer,
                        order=order,
                        customer_ref=customer.customer_ref,
                        credential=credential,
                    )
                except Exception as exc:
                    submit_errors += 1
                    say(f"submit {index} failed: {type(exc).__name__}: {exc}")
                    rental_ids.append(-1)
                else:
                    rental_ids.append(rental.pk)
                next_submit += submit_interval
                if redis is not None and redis_restart_at is not None and len(rental_ids) >= redis_restart_at:
                    say(f"[{elapsed(started)}] restarting Redis (SIGKILL, then start on port {redis.port})")
                    redis_down_seconds = redis.restart()
                    redis_restart_at = None

            ids = [pk for pk in rental_ids if pk > 0]
            counts = Counter(
                dict(
                    Rental.objects.filter(customer=customer)
                    .order_by()
                    .values_list("status")
                    .annotate(n=Count("id"))
                    .values_list("status", "n")
                )
            )
            settled = sum(counts[state] for state in SETTLED_STATES)
            all_submitted = len(rental_ids) >= args.rentals
            in_flight = len(ids) - settled

            # Kill a worker at a random moment (sooner while the minimum is not reached and work remains).
            if now >= next_kill and (in_flight > 0 or not all_submitted):
                slot = rng.randrange(len(workers.slots))
                workers.kill(slot)
                if rng.random() < 0.5:
                    time.sleep(rng.uniform(0.2, 2.0))  # sometimes leave the fleet one short for a while
                workers.start(slot)
                say(
                    f"[{elapsed(started)}] SIGKILLed worker {slot}{' (beat)' if slot == 0 else ''}, "
                    f"started a replacement (kill {workers.kills})"
                )
                if planned:
                    next_kill = max(planned.pop(0), time.monotonic() + 1.0)
                else:
                    gap = rng.expovariate(1.0 / kill_every)
                    if workers.kills < args.min_kills and all_submitted:
                        gap = min(gap, 2.0)
                    next_kill = time.monotonic() + max(1.0, min(gap, 3 * kill_every))
            crashed = workers.check_alive()
            if crashed:
                crashed_restarts += len(crashed)
                say(f"[{elapsed(started)}] worker(s) {crashed} exited by themselves; restarted. Last lines:")
                for slot in crashed:
                    lines = (run_dir / f"worker-{slot}.log").read_text(errors="replace").splitlines()
                    for line in lines[-8:]:
                        say(f"    worker-{slot}: {line[:200]}")

            if now - last_progress >= 3:
                last_progress = now
                shown = ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))
                say(
                    f"[{elapsed(started)}] submitted {len(rental_ids)}/{args.rentals}  settled {settled}  "
                    f"in flight {in_flight}  kills {workers.kills}  | {shown}"
                )

            if all_submitted and in_flight == 0 and (workers.kills >= args.min_kills or kill_every <= 0):
                break
            if all_submitted and in_flight == 0:
                break  # nothing left to disturb
            if now > deadline:
                say(f"[{elapsed(started)}] timeout: {in_flight} rentals still in flight")
                break
            time.sleep(0.2 if not all_submitted else 0.5)

        # Compare ----------------------------------------------------------------------------------------
        import httpx

        control = httpx.Client(base_url=sim_url, timeout=30.0)
        ledger = control.get("/_sim/ledger").raise_for_status().json()
        requests_log = control.get("/_sim/requests").raise_for_status().json()
        ledger = ledger["ledger"] if isinstance(ledger, dict) else ledger
        requests_log = requests_log["requests"] if isinstance(requests_log, dict) else requests_log

        rentals = list(Rental.objects.filter(pk__in=[pk for pk in rental_ids if pk > 0]))
        by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
        by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in ledger:
            by_key[str(entry.get("idempotency_key"))].append(entry)
            by_name[str(entry.get("pod_name"))].append(entry)
        bodies_by_key: dict[str, set[str]] = defaultdict(set)
        for entry in requests_log:
            bodies_by_key[str(entry.get("idempotency_key"))].add(str(entry.get("body_sha256")))
        reused_attempts = set(
            RentAttempt.objects.filter(rental__in=rentals, error_code="idempotency_key_reused").values_list(
                "rental_id", flat=True
            )
        )
        attempts = RentAttempt.objects.filter(rental__in=rentals).count()
        classes = Counter(RentAttempt.objects.filter(rental__in=rentals).values_list("classification", flat=True))

        our_keys = {str(r.idempotency_key) for r in rentals}
        our_names = {r.pod_name for r in rentals}
        problems: dict[str, list[tuple[Rental | None, str]]] = defaultdict(list)
        unknown_with_cluster = 0
        final_counts: Counter[str] = Counter()
        for rental in rentals:
            final_counts[rental.status] += 1
            key = str(rental.idempotency_key)
            entries = {id(e): e for e in by_key.get(key, []) + by_name.get(rental.pod_name, [])}.values()
            clusters = {str(e.get("cluster_id")) for e in entries}
            if len(by_key.get(key, [])) > 1 or len(clusters) > 1:
                problems["duplicates"].append((rental, f"{len(clusters)} clusters: {sorted(clusters)}"))
            if rental.status not in SETTLED_STATES:
                problems["lost"].append((rental, f"still {rental.status} after {rental.attempt_count} attempts"))
            elif rental.status in HOLDS_CLUSTER:
                if not clusters:
                    problems["untruthful"].append((rental, f"{rental.status} but the ledger has no cluster"))
                elif rental.cluster_id and rental.cluster_id not in clusters:
                    problems["untruthful"].append(
                        (rental, f"{rental.status} as {rental.cluster_id} but the ledger says {sorted(clusters)}")
                    )
            elif rental.status in NOTHING_RENTED and clusters:
                problems["untruthful"].append((rental, f"{rental.status} but the ledger has {sorted(clusters)}"))
            elif rental.status == "unknown" and clusters:
                unknown_with_cluster += 1
            if rental.pk in reused_attempts or len(bodies_by_key.get(key, set())) > 1:
                problems["key_reused"].append(
                    (rental, f"{len(bodies_by_key.get(key, set()))} distinct bodies sent with one key")
                )
        # A committed rent that no rental of ours accounts for is a cluster nobody will ever see.
        foreign = [
            e
            for e in ledger
            if str(e.get("idempotency_key")) not in our_keys and str(e.get("pod_name")) not in our_names
        ]
        for entry in foreign:
            problems["duplicates"].append((None, f"ledger entry no rental accounts for: {entry}"))
        lost = len(problems["lost"]) + submit_errors

        seconds = round(time.monotonic() - started, 1)
        result = {
            "rentals": args.rentals,
            "settled": sum(final_counts[s] for s in SETTLED_STATES),
            "duplicates": len(problems["duplicates"]),
            "lost": lost,
            "untruthful": len(problems["untruthful"]),
            "key_reused": len(problems["key_reused"]),
            "unknown": final_counts["unknown"],
            "attempts": attempts,
            "worker_kills": workers.kills,
            "seconds": seconds,
        }

        say("")
        say("=" * 72)
        say(
            f"chaos run, seed {args.seed}: {args.rentals} rentals, {args.workers} workers x {args.concurrency}, "
            f"broker {broker}, database {connection.vendor}"
        )
        rows = [
            ("final states", ", ".join(f"{s} {n}" for s, n in sorted(final_counts.items()))),
            ("attempts", f"{attempts} ({', '.join(f'{c} {n}' for c, n in sorted(classes.items()))})"),
            ("rent calls seen upstream", str(sum(str(e.get("idempotency_key")) in our_keys for e in requests_log))),
            ("clusters in the ledger", f"{len(ledger)} (foreign: {len(foreign)})"),
            (
                "unknown with a cluster",
                f"{unknown_with_cluster} of {final_counts['unknown']} (reconciliation would find it)",
            ),
            (
                "worker kills",
                f"{workers.kills} SIGKILL ({workers.beat_kills} of the beat worker); "
                f"{crashed_restarts} exited by themselves",
            ),
            ("redis restarts", f"1 (down {redis_down_seconds:.1f}s)" if redis_down_seconds else "0"),
            ("submit errors", str(submit_errors)),
            (
                "duplicates / lost / untruthful / key_reused",
                f"{result['duplicates']} / {result['lost']} / {result['untruthful']} / {result['key_reused']}",
            ),
            ("seconds", str(seconds)),
        ]
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            say(f"  {name:<{width}}  {value}")
        bad = [
            (kind, subject, why)
            for kind in ("duplicates", "lost", "untruthful", "key_reused")
            for subject, why in problems[kind]
        ]
        for kind, subject, why in bad[: args.explain]:
            say("")
            if subject is None:
                say(f"  {kind}: {why}")
                continue
            rental = subject
            say(f"  {kind}: rental {rental.pk} {rental.pod_name} key {rental.idempotency_key}: {why}")
            for attempt in RentAttempt.objects.filter(rental=rental).order_by("number"):
                say(
                    f"    attempt {attempt.number} {attempt.started_at:%H:%M:%S.%f} {attempt.duration_ms}ms "
                    f"http {attempt.http_status} {attempt.classification} {attempt.error_code} "
                    f"replayed={attempt.replayed} {attempt.request_id} {attempt.message[:80]}"
                )
            for event in RentalEvent.objects.filter(rental=rental).order_by("at", "id"):
                say(
                    f"    event {event.at:%H:%M:%S.%f} {event.from_status or '-'} -> {event.to_status or '-'}: "
                    f"{event.message[:100]}"
                )
            for entry in requests_log:
                if entry.get("idempotency_key") == str(rental.idempotency_key):
                    say(
                        f"    upstream {entry.get('at')} {entry.get('request_id')} status {entry.get('status')} "
                        f"replayed={entry.get('replayed')} dropped={entry.get('dropped')}"
                    )
        worker_errors = 0
        for log_path in sorted(run_dir.glob("worker-*.log")):
            worker_errors += log_path.read_text(errors="replace").count("raised unexpected")
        if worker_errors:
            say(f"  note: {worker_errors} task(s) raised unexpected errors; see {run_dir}/worker-*.log")
        ok = not (result["duplicates"] or result["lost"] or result["untruthful"] or result["key_reused"])
        say("=" * 72)
        if not ok or args.keep:
            say(f"run folder kept: {run_dir} (worker-*.log, simulator.log, db)")
        print(json.dumps(result), flush=True)
        return 0 if ok else 1
    except KeyboardInterrupt:
        say("interrupted; stopping every process this run started")
        return 130
    finally:
        procs.stop_all()
        try:
            if cleanup_rows is not None:
                cleanup_rows()
        except Exception as exc:
            say(f"note: could not delete this run's rows: {exc}")
        if scratch is not None:
            try:
                from django.db import connections

                connections.close_all()
                scratch.drop()
            except Exception as exc:
                say(f"note: could not drop scratch database {scratch.name}: {exc}")
        if ok and not args.keep and not args.run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
