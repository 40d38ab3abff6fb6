"""What the bench's stages hand one another: the run, the stack it started, the people it logs in as."""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.harness import Processes, ScratchPostgres, Simulator

if TYPE_CHECKING:
    import httpx

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ bench@run"
PASSWORD = "bench-password-1"  # noqa: S105 - a throwaway user in a throwaway database
SETTLED = ("rented", "ready", "degraded", "refused", "failed", "unknown", "not_rented", "cancelled")
PHASES = ("submit", "engine", "ready", "burst", "poll", "pages", "search", "listing")

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


@dataclass
class Run:
    """One bench run: its options, folder and children, and the figures it gathers."""

    args: argparse.Namespace
    phases: set[str]
    run_dir: Path
    procs: Processes
    started: float
    result: dict[str, Any] = field(default_factory=lambda: {"ok": False})
    summary: list[tuple[str, str]] = field(default_factory=list)
    scratch: ScratchPostgres | None = None


@dataclass
class Stack:
    """The servers the bench measures: the simulator, gunicorn, and the environment their children share."""

    sim: Simulator
    gunicorn: subprocess.Popen
    web: str  # gunicorn's base URL
    broker_label: str
    child_env: dict[str, str]


@dataclass
class People:
    """Who rents and who supports, in the database and as logged-in HTTP clients of gunicorn."""

    credential: Any
    customer: Any
    alice: Any
    user_http: httpx.Client
    staff_http: httpx.Client
    template_id: str
