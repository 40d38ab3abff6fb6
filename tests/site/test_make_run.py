"""`make run` on other ports: the processes it starts get addresses that follow the ports asked for."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HONCHO = ".venv/bin/honcho -f Procfile start"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make, as `make run` does")


def run_environment(*make_arguments: str, **environ: str) -> dict[str, str]:
    """Return the environment `make run` starts its processes with: its dry run's last command, with `env` in
    place of honcho, run in a shell whose environment has no address variables but `environ`."""
    names = {"PORT", "SIM_PORT", "SITE_URL", "LIUM_BASE_URL", "WEB_PORT", "MAKEFLAGS", "MAKELEVEL"}
    env = {name: value for name, value in os.environ.items() if name not in names} | environ
    dry_run = subprocess.run(
        ["make", "-n", "run", *make_arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    start = next(line for line in dry_run.stdout.splitlines() if HONCHO in line)
    shown = subprocess.run(
        ["bash", "-c", start.replace(HONCHO, "env")], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return dict(line.split("=", 1) for line in shown.stdout.splitlines() if "=" in line)


def test_other_ports_move_the_links_in_e_mails_and_the_simulator_address_with_them() -> None:
    started = run_environment("PORT=9010", "SIM_PORT=8310")
    assert started["WEB_PORT"] == "9010"
    assert started["SITE_URL"] == "http://127.0.0.1:9010"  # the links in e-mails and webhooks
    assert started["SIM_PORT"] == "8310"
    assert started["LIUM_BASE_URL"] == "http://127.0.0.1:8310/api"  # where the seeded credential and workers call


def test_the_default_ports_and_addresses_set_by_hand_are_kept() -> None:
    assert run_environment()["SITE_URL"] == "http://127.0.0.1:8000"
    started = run_environment("PORT=9010", SITE_URL="https://dash.example.com", LIUM_BASE_URL="http://sim:9/api")
    assert started["SITE_URL"] == "https://dash.example.com"
    assert started["LIUM_BASE_URL"] == "http://sim:9/api"
