"""Fixtures for the upstream contract suite.

By default a simulator subprocess is started for the session (``--mode test --start-seconds 1``)
and reset before every test. With ``LIUM_CONTRACT_BASE_URL`` and ``LIUM_CONTRACT_API_KEY`` set, the
same tests run against that base URL instead; tests that need ``/_sim/*`` control are skipped there,
and tests that rent are skipped unless ``LIUM_CONTRACT_ALLOW_RENT=1`` (a real rent costs money).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MAIN_KEY = "sim-demo-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ contract@test"
REMOTE_URL = os.environ.get("LIUM_CONTRACT_BASE_URL")
REMOTE_KEY = os.environ.get("LIUM_CONTRACT_API_KEY")
REMOTE = bool(REMOTE_URL and REMOTE_KEY)
LOGS: dict[int, Path] = {}  # simulator pid -> its stderr log


def pytest_configure(config: pytest.Config) -> None:
    """Register this suite's markers (the project runs with --strict-markers)."""
    config.addinivalue_line("markers", "sim_only: needs the simulator's /_sim control endpoints or demo keys")
    config.addinivalue_line("markers", "rents: creates a real rental (skipped remotely unless allowed)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip what a remote upstream cannot or should not run."""
    if not REMOTE:
        return
    no_sim = pytest.mark.skip(
        reason="needs the simulator's /_sim/* control endpoints or demo keys; "
        "not available against LIUM_CONTRACT_BASE_URL"
    )
    no_rent = pytest.mark.skip(reason="rents real nodes; set LIUM_CONTRACT_ALLOW_RENT=1 to allow it remotely")
    for item in items:
        if "contract" not in str(item.path):
            continue
        if item.get_closest_marker("sim_only"):
            item.add_marker(no_sim)
        elif item.get_closest_marker("rents") and os.environ.get("LIUM_CONTRACT_ALLOW_RENT") != "1":
            item.add_marker(no_rent)


def fake_ssh_key(comment: str = "k") -> str:
    """Build a well-formed ssh-ed25519 public key line (not a real key pair)."""
    blob = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes(range(32))
    return f"ssh-ed25519 {base64.b64encode(blob).decode()} {comment}"


class Api:
    """A thin httpx wrapper that knows the base URL, the main key and the control routes."""

    def __init__(self, base_url: str, key: str, remote: bool) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.remote = remote
        self.http = httpx.Client(base_url=self.base_url, timeout=15.0)
        self.rented: list[str] = []  # pod ids this test rented (removed afterwards on a remote upstream)

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()

    def headers(self, key: str | None = None, **extra: str) -> dict[str, str]:
        """Return auth headers for ``key`` (the main key by default) plus ``extra``."""
        return {"X-API-Key": key or self.key, **extra}

    def get(self, path: str, key: str | None = None, **kw: Any) -> httpx.Response:
        """GET with the main key; on a remote upstream a 429 is waited out, as the SDK does for reads."""
        for _ in range(5):
            r = self.http.get(path, headers=self.headers(key), **kw)
            if not (self.remote and r.status_code == 429):
                return r
            time.sleep(min(int(r.headers.get("Retry-After", "5")), 60))
        return r

    def rent_raw(
        self,
        body: bytes,
        key: str | None = None,
        idem: str | None = None,
        ref: str | None = None,
        headers: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """POST exact body bytes to the cluster rent route."""
        h: dict[str, Any] = self.headers(key, **{"Content-Type": "application/json"})
        if idem is not None:
            h["Idempotency-Key"] = idem
        if ref is not None:
            h["X-Customer-Ref"] = ref
        h.update(headers or {})
        r = self.http.post("/executors/cluster/rent", content=body, headers=h)
        if r.status_code == 200 and r.json().get("success", True):
            self.rented.extend(r.json().get("pod_ids") or [])
        return r

    def remove_rented(self) -> None:
        """Delete every cluster this test rented (a remote upstream is not reset between tests)."""
        if not self.rented:
            return
        clusters = {p["cluster_id"] for p in self.pods() if p["id"] in self.rented and p["cluster_id"]}
        for cluster_id in clusters:
            self.http.delete(f"/clusters/{quote(cluster_id, safe='')}", headers=self.headers())
        # Wait (bounded) for the rows to go, so the next test finds the nodes free again.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and {p["id"] for p in self.pods()} & set(self.rented):
            time.sleep(2)

    def rent(self, order: dict[str, Any], **kw: Any) -> httpx.Response:
        """POST an order dict (serialised deterministically)."""
        return self.rent_raw(json.dumps(order, sort_keys=True).encode(), **kw)

    def pods(self, key: str | None = None, **params: str) -> list[dict[str, Any]]:
        """Return GET /pods rows."""
        r = self.get("/pods", key=key, params=params)
        assert r.status_code == 200, r.text
        return r.json()

    def offers(self) -> list[dict[str, Any]]:
        """Return the fabric offers."""
        r = self.get("/executors/infiniband-clusters")
        assert r.status_code == 200, r.text
        return r.json()

    def cheapest(self, count: int = 2, fabric: int = 0) -> list[str]:
        """Return the ids of the ``count`` cheapest whole free nodes of the ``fabric``-th offer.

        On a remote upstream the ``fabric``-th offer that has enough free nodes is used instead.
        """

        def whole(offer: dict[str, Any]) -> list[dict[str, Any]]:
            nodes = [n for n in offer["nodes"] if n["available_gpu_count"] == n["gpu_count"]]
            return sorted(nodes, key=lambda n: (float(n["price_per_gpu"]) * int(n["gpu_count"]), n["id"]))

        offers = self.offers()
        if self.remote:
            offers = [o for o in offers if len(whole(o)) >= count]
            if len(offers) <= fabric:
                pytest.skip("the upstream has too few free nodes for this test")
        nodes = whole(offers[fabric])
        assert len(nodes) >= count, "not enough free nodes"
        return [n["id"] for n in nodes[:count]]

    def order(self, nodes: list[str], **extra: Any) -> dict[str, Any]:
        """Build a valid cluster order for ``nodes``."""
        return {"pod_name": "contract-test", "executor_uuids": nodes, "user_public_key": [SSH_KEY], **extra}

    # -- simulator control ------------------------------------------------------------
    def sim(self, method: str, path: str, body: Any = None) -> Any:
        """Call a /_sim control route and return its JSON."""
        if self.remote:
            pytest.skip("needs the simulator's /_sim/* control endpoints")
        r = self.http.request(method, f"/_sim/{path}", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    def faults(self, *rules: dict[str, Any], seed: int = 1) -> None:
        """Replace the fault rules."""
        self.sim("POST", "faults", {"seed": seed, "rules": list(rules)})

    def advance(self, seconds: float) -> None:
        """Advance the simulated clock."""
        self.sim("POST", "clock", {"advance_seconds": seconds})

    def config(self, **settings: Any) -> dict[str, Any]:
        """Change simulator settings."""
        return self.sim("POST", "config", settings)


def start_simulator(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m simulator`` on a free port; return the process and its root URL."""
    cmd = [
        sys.executable,
        "-m",
        "simulator",
        "--port",
        "0",
        *(args or ("--mode", "test", "--start-seconds", "1")),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("LIUM_SIM_API_KEY", None)  # the suite relies on the documented demo key
    # stderr goes to a file: an unread pipe could fill up and stall the server.
    log = tempfile.NamedTemporaryFile(prefix="lium-sim-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    log.close()  # the child holds its own descriptor
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on http://" not in line:
        proc.kill()
        raise RuntimeError(f"simulator did not start: {line}{Path(log.name).read_text()}")
    url = line.split("listening on ")[1].split()[0]
    LOGS[proc.pid] = Path(log.name)
    return proc, url


def stop_simulator(proc: subprocess.Popen[str]) -> None:
    """Stop a simulator started by ``start_simulator`` and remove its log."""
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()
    log = LOGS.pop(proc.pid, None)
    if log is not None:
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def _server() -> Iterator[tuple[str, str, bool]]:
    if REMOTE:
        assert REMOTE_URL and REMOTE_KEY
        yield REMOTE_URL, REMOTE_KEY, True
        return
    proc, url = start_simulator()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/version", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    try:
        yield url + "/api", MAIN_KEY, False
    finally:
        stop_simulator(proc)


@pytest.fixture
def api(_server: tuple[str, str, bool]) -> Iterator[Api]:
    """An API client; the simulator is reset before each test."""
    base, key, remote = _server
    client = Api(base, key, remote)
    if not remote:
        r = client.http.post("/_sim/reset")
        assert r.status_code == 200, r.text
    try:
        yield client
        if remote:
            client.remove_rented()
    finally:
        client.close()
