"""Shared fixtures: personas, the simulator as a real HTTP server, and a real Celery worker process.

Personas make permission tests read as sentences: alice and her teammate carol (Acme Research),
bob of another customer (Globex), sam from support, olga the operator.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.doubles import EXECUTORS, Clock, Enqueued, WallClock

REPO_ROOT = Path(__file__).resolve().parents[1]
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ alice@laptop"
SIM_KEY = "sim-demo-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, *, timeout: float = 20.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} before answering")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def stop_process(process: subprocess.Popen) -> None:
    """Stop a process group politely, then firmly."""
    if process.poll() is not None:
        return
    # SIGTERM to the main process only: it stops its own children (a worker's pool) and exits; signalling
    # the whole group kills the children first and leaves the main process waiting for them.
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait(timeout=5)


def start_gunicorn(*, port: int, env: dict[str, str], workers: int = 1) -> subprocess.Popen:
    """Start the production web server (deploy/gunicorn.conf.py) on 127.0.0.1:port; return once it answers."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "deploy/gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "dashboard.wsgi",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # Generous: a busy machine (CI's two cores) takes a while to import Django in each worker.
        wait_for_http(f"http://127.0.0.1:{port}/healthz", process=server, timeout=60.0)
    except BaseException:
        stop_process(server)  # never leave a server behind a failed start
        raise
    return server


class Simulator:
    """A running simulator process and its control endpoints."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.api_url = base_url + "/api"
        self.http = httpx.Client(base_url=base_url, timeout=10.0)

    def reset(self) -> None:
        self.http.post("/_sim/reset").raise_for_status()

    def faults(self, rules: list[dict], seed: int = 1) -> None:
        self.http.post("/_sim/faults", json={"seed": seed, "rules": rules}).raise_for_status()

    def ledger(self) -> list[dict]:
        data = self.http.get("/_sim/ledger").raise_for_status().json()
        return data["ledger"] if isinstance(data, dict) else data

    def requests(self, route: str | None = None) -> list[dict]:
        """The rent calls received, or with `route` the recent calls of that route ("*": every route)."""
        params = {"route": route} if route else {}
        data = self.http.get("/_sim/requests", params=params).raise_for_status().json()
        return data["requests"] if isinstance(data, dict) else data

    def offers(self) -> list[dict]:
        return self.http.get("/api/executors/infiniband-clusters", headers={"X-API-Key": SIM_KEY}).json()

    def config(self, **settings: object) -> dict:
        """Change the simulator's runtime settings (e.g. `multinode_clusters_enabled=False`)."""
        return self.http.post("/_sim/config", json=settings).raise_for_status().json()

    def out_of_band(self, action: str, pod_id: str, actor: str = "portal", **extra: object) -> dict:
        """Change a pod as the portal (or the CLI, another key, the platform) would, outside the dashboard."""
        body = {"action": action, "pod_id": pod_id, "actor": actor, **extra}
        return self.http.post("/_sim/out-of-band", json=body).raise_for_status().json()


@pytest.fixture(scope="session")
def simulator_process() -> Iterator[Simulator]:
    """Start the simulator on a free port for the whole session (pods start in 1 s)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "simulator", "--port", str(port), "--mode", "test", "--start-seconds", "1"],
        cwd=REPO_ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base_url + "/api/version", process=process)
        yield Simulator(base_url)
    finally:
        stop_process(process)


@pytest.fixture
def simulator(simulator_process: Simulator) -> Simulator:
    """The session's simulator, reset to its seed state for this test."""
    simulator_process.reset()
    return simulator_process


def _worker_database_url() -> str:
    from django.db import connection

    cfg = connection.settings_dict
    if cfg["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{cfg['NAME']}"
    user = cfg.get("USER") or ""
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{cfg.get('HOST') or '127.0.0.1'}:{cfg.get('PORT') or 5432}/{cfg['NAME']}"


def _purge_broker() -> None:
    """Drop messages left by earlier tests, so a new worker does not chase rentals that no longer exist."""
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        queue = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])  # type: ignore[arg-type]
        shutil.rmtree(queue, ignore_errors=True)
        queue.mkdir(parents=True, exist_ok=True)
    else:
        from dashboard.celery import app

        app.control.purge()


WORKER_ENV = {
    "SWEEP_INTERVAL_SECONDS": "1",
    "RENT_QUEUED_STUCK_SECONDS": "3",
    "RENT_BACKOFF_BASE_SECONDS": "0.3",
    "RENT_BACKOFF_CAP_SECONDS": "2",
    "RENT_LEASE_SECONDS": "15",
    "POD_POLL_MIN_INTERVAL_SECONDS": "1.5",
    "LIUM_TIMEOUT_SECONDS": "5",
}


ALL_QUEUES = "rent,tracking,housekeeping,fabric_check,celery"


def start_worker(
    *,
    concurrency: int = 2,
    beat: bool = True,
    extra_env: dict[str, str] | None = None,
    log_path: Path | None = None,
    queues: str = ALL_QUEUES,
    name: str = "",
) -> subprocess.Popen:
    """Start a real `celery worker` process (threads pool) on this test run's database and broker; by
    default it consumes every queue."""
    env = {**os.environ, **WORKER_ENV, "DATABASE_URL": _worker_database_url(), **(extra_env or {})}
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
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
    if name:
        args.append(f"--hostname={name}@%h")
    if beat:
        args += ["--beat", f"--schedule={settings.RUN_DIR / 'test-beat-schedule'}"]
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, cwd=REPO_ROOT, env=env, start_new_session=True, stdout=log, stderr=log)


@pytest.fixture
def celery_worker_process(transactional_db: None, tmp_path: Path) -> Iterator[subprocess.Popen]:
    """A real worker (with beat) for one test; its log is printed if the test fails."""
    _purge_broker()
    log_path = tmp_path / "worker.log"
    process = start_worker(log_path=log_path)
    try:
        yield process
    finally:
        stop_process(process)
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        sys.stderr.write(log[-4000:])
        assert not any(secret in log for secret in UPSTREAM_SECRETS), "the worker logged an upstream secret"


# --- Personas --------------------------------------------------------------------------------------------


@pytest.fixture
def credential(db: None, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The operator's Lium credential (pointing at the simulator when a test uses one)."""
    from accounts.models import UpstreamCredential

    base_url = "http://lium.invalid/api"
    if "simulator" in request.fixturenames:
        base_url = request.getfixturevalue("simulator").api_url
    credential = UpstreamCredential(name="main", base_url=base_url)
    credential.set_secret(SIM_KEY)
    credential.save()
    return credential


@pytest.fixture
def acme(credential):  # type: ignore[no-untyped-def]
    from accounts.models import Customer

    return Customer.objects.create(name="Acme Research", customer_ref="acme", default_credential=credential)


@pytest.fixture
def globex(credential):  # type: ignore[no-untyped-def]
    from accounts.models import Customer

    return Customer.objects.create(name="Globex", customer_ref="globex", default_credential=credential)


def _user(username: str, *, customer=None, group: str | None = None, superuser: bool = False):  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import Group, User

    from accounts.models import Membership

    user = User.objects.create_user(
        username, f"{username}@example.com", "pw", is_superuser=superuser, is_staff=superuser
    )
    if customer is not None:
        Membership.objects.create(user=user, customer=customer)
    if group is not None:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


@pytest.fixture
def alice(acme):  # type: ignore[no-untyped-def]
    return _user("alice", customer=acme)


@pytest.fixture
def carol(acme):  # type: ignore[no-untyped-def]
    """Alice's teammate at Acme Research."""
    return _user("carol", customer=acme)


@pytest.fixture
def bob(globex):  # type: ignore[no-untyped-def]
    return _user("bob", customer=globex)


@pytest.fixture
def dana(simulator: Simulator, acme, globex):  # type: ignore[no-untyped-def]
    """A member of Acme (the simulator's main key) and of Globex, which rents on another Lium account."""
    from accounts.models import Customer, Membership, UpstreamCredential

    other = UpstreamCredential(name="other", base_url=simulator.api_url)
    other.set_secret("sim-other-key")
    other.save()
    Customer.objects.filter(pk=globex.pk).update(default_credential=other)
    user = _user("dana", customer=acme)
    Membership.objects.create(user=user, customer=globex)
    return user


@pytest.fixture
def sam(db):  # type: ignore[no-untyped-def]
    """Support: reads everything, changes nothing."""
    return _user("sam", group="support")


@pytest.fixture
def olga(db):  # type: ignore[no-untyped-def]
    """The operator: acts on any rental."""
    return _user("olga", group="operator")


@pytest.fixture
def client_for(client):  # type: ignore[no-untyped-def]
    """Return a logged-in test client for a persona."""

    def login(user):  # type: ignore[no-untyped-def]
        client.force_login(user)
        return client

    return login


# --- The upstream secret must never leave: no page, fragment, admin screen or log line shows it -------------

UPSTREAM_SECRETS = (SIM_KEY, "sim-demo-token")


@pytest.fixture(autouse=True)
def no_upstream_secret_leaks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, caplog):  # type: ignore[no-untyped-def]
    """Fail any test in which a Django response or a log record carries an upstream secret."""
    if request.node.get_closest_marker("allow_secret_in_output"):
        yield
        return
    from django.test import Client

    leaks: list[str] = []
    original = Client.request

    def checked_request(self, **kwargs):  # type: ignore[no-untyped-def]
        response = original(self, **kwargs)
        if not getattr(response, "streaming", False):
            body = response.content.decode(errors="replace")
            leaks.extend(f"response to {kwargs.get('PATH_INFO')}" for secret in UPSTREAM_SECRETS if secret in body)
        return response

    monkeypatch.setattr(Client, "request", checked_request)
    yield
    leaks.extend(
        f"log line of {record.name}"
        for record in caplog.records
        for secret in UPSTREAM_SECRETS
        if secret in record.getMessage()
    )
    assert not leaks, f"an upstream secret leaked into: {leaks}"


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    """Start every test with empty caches: no offer listing, rate-limit counter or fragment from an earlier test."""
    from django.core.cache import caches

    for cache in caches.all(initialized_only=False):
        cache.clear()
    yield


@pytest.fixture(autouse=True)
def fast_password_hasher(settings) -> None:  # type: ignore[no-untyped-def]
    """Hash test passwords cheaply: the real hasher costs ~0.3 s per persona and proves nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# --- Shared doubles: one meaning per fixture name in every folder ------------------------------------------


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> Enqueued:
    """Record Celery enqueues of the rentals (task name, args, countdown) instead of sending them to a broker."""
    recorder = Enqueued()

    def record(task_name: str, *args: object, countdown: float | None = None) -> None:
        recorder.calls.append((task_name, args, countdown))

    monkeypatch.setattr("rentals.enqueue._enqueue", record)
    return recorder


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """`django.utils.timezone.now()` moved by hand (`clock.advance(minutes=5)`, or `clock.now = ...`), starting at
    the real time to the second. Only Django's clock is moved: `time.time()` and the database's clock are not."""
    from django.utils import timezone

    moved = Clock(timezone.now().replace(microsecond=0))
    monkeypatch.setattr(timezone, "now", moved)
    yield moved


@pytest.fixture
def limiter_clock(monkeypatch: pytest.MonkeyPatch) -> WallClock:
    """The rate limiters' clock (common.ratelimit's and api.keys' only), stopped at the start of a one-minute
    window: every request of the test counts in that window until the test moves it (`limiter_clock.now += 60`)."""
    stopped = WallClock(1_800_000_000.0)  # a whole minute: windows are `now // 60`
    for limiter in ("common.ratelimit", "api.keys"):
        monkeypatch.setattr(f"{limiter}.time", stopped)
    return stopped


@pytest.fixture
def make_rental(alice, acme, enqueued):  # type: ignore[no-untyped-def]
    """Return a function that submits a rental the way the order form does (row, nodes, key, body, its `created`
    event; its first send recorded in `enqueued`, not sent), then sets any other fields straight in the database
    (`status=`, `cluster_id=`, ...). By default alice orders for Acme; `customer=` orders for another customer as
    its first member (none: no author), `user=` as that user for their customer."""
    from rentals.models import Rental
    from rentals.orders.order import RentOrder
    from rentals.services import rental_submit

    def make(  # type: ignore[no-untyped-def]
        *, user=None, customer=None, pod_name: str = "train-1", executors: list[str] | None = None, **fields: Any
    ) -> Rental:
        if user is not None:
            customer = customer or user.memberships.get().customer
        elif customer is None or customer == acme:
            customer, user = acme, alice
        else:
            membership = customer.memberships.first()
            user = membership.user if membership is not None else None
        order = RentOrder(
            fabric_id="fab-1",
            executor_ids=list(executors or EXECUTORS),
            pod_name=pod_name,
            public_keys=[SSH_KEY],
        )
        rental = rental_submit(user=user, customer=customer, order=order, customer_ref=customer.customer_ref)
        if fields:
            Rental.objects.filter(pk=rental.pk).update(**fields)
            rental.refresh_from_db()
        return rental

    return make
