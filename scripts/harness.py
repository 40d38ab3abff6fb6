"""The machinery of the chaos run and the bench: child processes with their logs, free ports and waits, a
private Redis, Celery workers, a scratch PostgreSQL database, and the simulator (started, configured and read
back through its /_sim control routes).

Nothing here knows what a rental is; `scripts/chaos.py` and `bench/run.py` drive their runs and judge them.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parents[1]
SIM_KEY = "sim-demo-key"
T = TypeVar("T")


# --- Small helpers -------------------------------------------------------------------------------------


def free_port() -> int:
    """Return a loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def say(message: str = "") -> None:
    print(message, flush=True)


def elapsed(start: float) -> str:
    return f"{time.monotonic() - start:6.1f}s"


def wait_until(read: Callable[[], T], done: Callable[[T], bool], *, timeout: float, interval: float) -> T | None:
    """Call `read` every `interval` seconds until `done` accepts its value or `timeout` passes; return the last
    value read (None when the timeout had passed before the first read)."""
    value: T | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if done(value):
            break
        time.sleep(interval)
    return value


def interrupt_on(*signals: int) -> None:
    """Make each of `signals` raise KeyboardInterrupt, so a run stopped from outside still cleans up."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    for sig in signals:
        signal.signal(sig, interrupt)


def django_setup_and_migrate() -> None:
    """Set Django up from the environment already in place, then migrate its database quietly."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


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

    @staticmethod
    def stop(process: subprocess.Popen, grace: float = 15.0) -> None:
        """Stop one child: SIGTERM its group, wait up to `grace` seconds, then SIGKILL whatever is left."""
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace)
        # The group may outlive its leader (a pool child): take it down too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.poll() is None:
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


def wait_for_child(ready: Callable[[], bool], *, process: subprocess.Popen, timeout: float, what: str) -> None:
    """Ask `ready` every tenth of a second until it says yes; fail once `process` exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} before {what}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{process.args!r} was not {what} after {timeout} s")


def wait_for_port(port: int, *, process: subprocess.Popen, timeout: float = 20.0) -> None:
    """Wait until something listens on the loopback `port`; fail early when `process` exits."""

    def listens() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_for_child(listens, process=process, timeout=timeout, what=f"listening on port {port}")


def wait_for_http(url: str, *, process: subprocess.Popen, timeout: float = 30.0) -> None:
    """Wait until `url` answers at all (any status); fail early when `process` exits."""
    import httpx

    def answers() -> bool:
        try:
            httpx.get(url, timeout=2.0)
        except httpx.HTTPError:
            return False
        return True

    wait_for_child(answers, process=process, timeout=timeout, what=f"answering {url}")


def wait_for_log_line(log: Path, marker: str, *, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until the child's `log` holds `marker`; fail with the log's end when the child exits first."""

    def logged() -> bool:
        return marker in log.read_text(errors="replace")

    try:
        wait_for_child(logged, process=process, timeout=timeout, what=f"logging {marker!r}")
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}; {log.name} ends:\n{log.read_text(errors='replace')[-2000:]}") from None


def children_of(pid: int) -> list[int]:
    """Return the ids of the processes whose parent is `pid` (read from /proc)."""
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


def peak_rss_mb(pid: int) -> float | None:
    """Return the process's peak resident memory (VmHWM) in MB, or None when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


# Every queue the dashboard routes to (settings.CELERY_TASK_ROUTES), and `celery`, the queue of releases before
# the split: a worker given ALL_QUEUES does every kind of work.
ALL_QUEUES = "rent,tracking,housekeeping,fabric_check,celery"


def celery_worker_args(
    *,
    concurrency: int,
    beat_schedule: Path | None = None,
    hostname: str = "",
    queues: str = ALL_QUEUES,
) -> list[str]:
    """Return the command line of one `celery worker` of the dashboard (with beat when given a schedule); its pool
    is the settings' CELERY_WORKER_POOL (set that in its environment for another)."""
    args = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "dashboard",
        "worker",
        "--loglevel=INFO",
        f"--queues={queues}",
        f"--concurrency={concurrency}",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    if hostname:
        args.append(f"--hostname={hostname}")
    if beat_schedule is not None:
        args += ["--beat", f"--schedule={beat_schedule}"]
    return args


SHELL_DEFAULT = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def procfile_workers(env: dict[str, str], procfile: Path = REPO_ROOT / "Procfile") -> dict[str, list[str]]:
    """Return {name: command line} of every `worker*` line of the Procfile, as `make run` starts them: the
    shell's `${NAME:-default}` read from `env`, and `celery` run by this interpreter."""
    workers: dict[str, list[str]] = {}
    for line in procfile.read_text().splitlines():
        name, _, command = line.partition(":")
        if not name.startswith("worker"):
            continue
        expanded = SHELL_DEFAULT.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), command)
        args = shlex.split(expanded)
        if args and args[0] == "celery":
            args = [sys.executable, "-m", "celery", *args[1:]]
        workers[name.strip()] = args
    return workers


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
        args = celery_worker_args(
            concurrency=self.concurrency,
            beat_schedule=self.run_dir / "beat-schedule" if slot == 0 else None,
            hostname=f"chaos{slot}-{self.started}@%h",
        )
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
    """A dedicated database on the given PostgreSQL server, created for this run and dropped after it.

    The database the URL names is never touched: the statements run on the server's `postgres` database.
    """

    def __init__(self, url: str, name: str) -> None:
        self.name = name
        parts = urlsplit(url)
        self.admin_conninfo = urlunsplit(("postgresql", parts.netloc, "/postgres", parts.query, ""))
        self.url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))

    def _execute(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_conninfo, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def create(self, *, replace: bool = False) -> None:
        """Create the database; with `replace`, drop one of that name left by an earlier run first."""
        if replace:
            self.drop()
        self._execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


PG_BIN = Path("/usr/lib/postgresql/15/bin")  # Debian's PostgreSQL 15


class PrivatePostgres:
    """A PostgreSQL cluster of the run's own (initdb in the run folder, a free port, its socket in the folder),
    which the run may stop and start at will: the machine's shared server is never touched.

    The server runs as the `postgres` user (PostgreSQL refuses root); `pg_ctl` daemonizes it, so it is not one of
    `Processes`' children and `destroy()` stops it.
    """

    def __init__(self, run_dir: Path, *, name: str = "chaos") -> None:
        self.dir = run_dir / "postgres"
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = free_port()
        self.name = name
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/{name}"
        self.running = False

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(PG_BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)  # noqa: S603

    def create(self) -> None:
        """initdb (trust on loopback), start it, and create the run's database."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            # The server's user must reach its folder: open the path to it, and hand the folder over.
            for parent in (self.dir.parent, *self.dir.parent.parents):
                if parent == Path("/"):
                    break
                parent.chmod(parent.stat().st_mode | 0o011)
            shutil.chown(self.dir, "postgres", "postgres")
        self._as_postgres("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        self.start()
        import psycopg

        with psycopg.connect(self.admin_conninfo, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')

    @property
    def admin_conninfo(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            # fsync off: the drill stops the server, never the machine, and the kernel keeps what was written.
            # synchronous_commit stays on: an immediate stop would otherwise lose transactions already committed.
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        )
        self._as_postgres("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", options)
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clients cut off, a clean shutdown) or `immediate` (as a crash: recovery at the
        next start)."""
        self._as_postgres("pg_ctl", "stop", "-w", "-t", "60", "-D", str(self.data), "-m", mode)
        self.running = False

    def destroy(self) -> None:
        """Stop the server if it runs (its folder goes with the run folder)."""
        if self.data.exists():
            self._as_postgres("pg_ctl", "stop", "-w", "-t", "30", "-D", str(self.data), "-m", "immediate", check=False)
        self.running = False


# --- The simulator ---------------------------------------------------------------------------------------


class Offers:
    """Picks free nodes, never one already given to an earlier rental of this run."""

    def __init__(self, sim_url: str, rng: random.Random | None = None) -> None:
        import httpx

        self.http = httpx.Client(base_url=sim_url, timeout=10.0, headers={"X-API-Key": SIM_KEY})
        self.rng = rng or random.Random(0)  # noqa: S311 - node choice, not crypto
        self.used: set[str] = set()
        self.pool: dict[str, list[dict[str, Any]]] = {}
        self.link_rates: dict[str, str] = {}  # fabric id -> its offer's link rate text (the fabric check's floor)
        self.fetched_at = 0.0

    def refresh(self) -> None:
        offers = self.http.get("/api/executors/infiniband-clusters").raise_for_status().json()
        self.http.cookies.clear()  # a set_cookie fault must not make this client send cookies back
        pool: dict[str, list[dict[str, Any]]] = {}
        for offer in offers:
            nodes = [
                node
                for node in offer.get("nodes", [])
                if node["id"] not in self.used
                and node.get("available_gpu_count", node.get("gpu_count")) == node.get("gpu_count")
            ]
            pool[offer["fabric_id"]] = nodes
            self.link_rates[offer["fabric_id"]] = str(offer.get("link_rate") or "")
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

    def pairs(self, count: int) -> list[tuple[str, list[str]]]:
        """Return `count` pairs of unused whole nodes, each pair on one fabric, in the listing's order (the
        same pairs for the same listing); raise when the simulator has fewer free."""
        self.refresh()
        pairs = [
            (fabric, [node["id"] for node in nodes[i : i + 2]])
            for fabric, nodes in self.pool.items()
            for i in range(0, len(nodes) - 1, 2)
        ][:count]
        if len(pairs) < count:
            raise RuntimeError(f"the simulator offers only {len(pairs)} free node pairs, {count} needed")
        for _fabric, ids in pairs:
            self.used.update(ids)
        return pairs


class ContestedOffers(Offers):
    """Picks, for every customer alike, the first free whole nodes of the first few fabrics in the listing, as
    people reading one marketplace page do (the shared-account chaos profile).

    A node picked less than `hold` seconds ago is skipped, and so is each node `waiting()` names (the caller's
    orders not sent yet: a queue slower than the orders would otherwise turn the run into collisions only);
    after that a node is offered again whenever the listing shows it free, so an order that rented nothing
    leaves its nodes to the next customer, and retried orders meet other customers' orders on the same nodes.
    """

    def __init__(
        self,
        sim_url: str,
        rng: random.Random | None = None,
        *,
        fabrics: int = 2,
        hold: float = 3.0,
        waiting: Callable[[], set[str]] = set,
    ) -> None:
        super().__init__(sim_url, rng)
        self.fabrics = fabrics
        self.hold = hold
        self.waiting = waiting
        self.picked_at: dict[str, float] = {}  # node id -> when it was last picked (monotonic)

    def pick(self, size: int) -> tuple[str, list[dict[str, Any]]] | None:
        """Return a fabric id and its first `size` free nodes not picked in the last `hold` seconds, or None."""
        self.refresh()  # every pick reads the listing afresh: what is free changes with every order
        now = time.monotonic()
        waiting = self.waiting()
        choices = []
        for fabric in sorted(self.pool)[: self.fabrics]:
            free = [
                n
                for n in self.pool[fabric]
                if n["id"] not in waiting and now - self.picked_at.get(n["id"], float("-inf")) >= self.hold
            ]
            if len(free) >= size:
                choices.append((fabric, free[:size]))
        if not choices:
            return None
        fabric, nodes = self.rng.choice(choices)
        for node in nodes:
            self.picked_at[node["id"]] = now
        return fabric, nodes


class Simulator:
    """One simulator process of the run, and its /_sim control routes."""

    def __init__(
        self,
        procs: Processes,
        *,
        name: str,
        seed: int | None = None,
        fabrics: int,
        nodes_per_fabric: int,
        faults: dict[str, Any] | None = None,
        pods_rate_limit: int | None = None,
        env: dict[str, str],
    ) -> None:
        self.procs = procs
        self.name = name
        self.seed = seed
        self.fabrics = fabrics
        self.nodes_per_fabric = nodes_per_fabric
        self.faults = faults
        self.pods_rate_limit = pods_rate_limit
        self.env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the process in test mode (with its seed and initial faults when given), wait until it
        listens, and open the control client."""
        import httpx

        args = [sys.executable, "-m", "simulator", "--mode", "test", "--port", str(self.port)]
        args += ["--start-seconds", "1", "--replenish"]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        if self.pods_rate_limit is not None:
            args += ["--pods-rate-limit", str(self.pods_rate_limit)]
        args += ["--fabrics", str(self.fabrics), "--nodes-per-fabric", str(self.nodes_per_fabric)]
        if self.faults is not None:
            args += ["--faults", json.dumps(self.faults)]
        self.process = self.procs.start(args, log_name=f"{self.name}.log", env=self.env)
        wait_for_port(self.port, process=self.process)
        self.control = httpx.Client(base_url=self.url, timeout=30.0)

    def set_faults(self, spec: dict[str, Any]) -> dict[str, str]:
        """Replace the fault rules with `spec`, leaving out each rule the simulator refuses.

        Return {fault name: the simulator's reason} for the rules left out (an older simulator does not
        know the newer faults; the run goes on without them and says so).
        """
        answer = self.control.post("/_sim/faults", json=spec)
        if answer.status_code != 422:
            answer.raise_for_status()
            return {}
        refused: dict[str, str] = {}
        kept = []
        for rule in spec["rules"]:
            probe = self.control.post("/_sim/faults", json={"seed": spec.get("seed", 0), "rules": [rule]})
            if probe.status_code == 422:
                refused.setdefault(str(rule.get("fault")), error_message(probe))
            else:
                probe.raise_for_status()
                kept.append(rule)
        self.control.post("/_sim/faults", json={**spec, "rules": kept}).raise_for_status()
        return refused

    def clear_faults(self) -> None:
        self.control.delete("/_sim/faults").raise_for_status()

    def set_config(self, settings: dict[str, Any]) -> str:
        """Change runtime settings; return "" when done, else the simulator's reason for refusing."""
        answer = self.control.post("/_sim/config", json=settings)
        if answer.status_code == 422:
            return error_message(answer)
        answer.raise_for_status()
        return ""

    def ledger(self) -> list[dict[str, Any]]:
        """Return every committed rent, each tagged with this simulator's name."""
        body = self.control.get("/_sim/ledger").raise_for_status().json()
        entries = body["ledger"] if isinstance(body, dict) else body
        return [{**entry, "sim": self.name} for entry in entries]

    def requests(self, route: str | None = None) -> list[dict[str, Any]]:
        """Return the request log: every rent call, or with `route` the recent calls of that route."""
        params = {"route": route} if route else None
        body = self.control.get("/_sim/requests", params=params).raise_for_status().json()
        entries = body["requests"] if isinstance(body, dict) else body
        return [{**entry, "sim": self.name} for entry in entries]

    def delete_calls(self) -> list[dict[str, Any]] | None:
        """Return the logged DELETE /clusters/{id} calls, or None when the simulator logs only rent calls
        (it then ignores `?route=` and answers with rent calls, which carry no `route` field)."""
        entries = self.requests("delete")
        if any(entry.get("route") != "delete" for entry in entries):
            return None
        return entries

    def pods(self) -> list[dict[str, Any]] | None:
        """Return the account's pod rows as the public GET /pods lists them, or None if it will not say."""
        for _ in range(4):
            answer = self.control.get("/api/pods", headers={"X-API-Key": SIM_KEY})
            if answer.status_code == 429:
                time.sleep(min(15.0, float(answer.headers.get("Retry-After", "2") or 2)))
                continue
            if answer.status_code != 200:
                return None
            rows = answer.json()
            return rows if isinstance(rows, list) else None
        return None


def error_message(answer: Any) -> str:
    """Return the message of a simulator error envelope (or the raw text)."""
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(body)[:300]


DELETE_PATH = re.compile(r"/clusters/([^/?#]+)")


def delete_call_cluster(entry: dict[str, Any]) -> str | None:
    """Return the cluster id a logged DELETE /clusters/{id} call named, or None for any other call."""
    if entry.get("route") != "delete":
        return None
    if entry.get("cluster_id"):
        return str(entry["cluster_id"])
    match = DELETE_PATH.search(str(entry.get("path") or ""))
    return unquote(match.group(1)) if match else ""
