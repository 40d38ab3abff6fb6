"""Settings read from the environment: the README's table lists exactly them, and a bad value names the variable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import settings as project_settings

ROOT = Path(__file__).resolve().parents[2]
# Read by a library rather than by dashboard/settings.py; the README documents them all the same.
READ_ELSEWHERE = {"PROMETHEUS_MULTIPROC_DIR"}


def readme_variables() -> set[str]:
    """Return the variable names in the first column of the README's configuration table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    return names


def test_the_readme_lists_every_variable_the_settings_read_and_no_other() -> None:
    read = set(project_settings.env.dump())
    documented = readme_variables()
    assert read - documented == set(), "read by the settings but missing from the README's table"
    assert documented - read - READ_ELSEWHERE == set(), "in the README's table but never read"


@pytest.mark.parametrize(
    ("name", "value", "expects"),
    [
        ("RENT_MAX_ATTEMPTS", "eight", "Not a valid integer"),
        ("LIUM_TIMEOUT_SECONDS", "soon", "Not a valid number"),
        ("RENT_MAX_ATTEMPTS", "0", "greater than or equal to 1"),
        ("DASHBOARD_ENV", "prod", "Must be one of"),
        ("SECURE_SSL_REDIRECT", "perhaps", "Not a valid boolean"),
    ],
)
def test_a_bad_value_stops_the_start_with_a_message_naming_the_variable(name: str, value: str, expects: str) -> None:
    env = {**os.environ, name: value}
    result = subprocess.run(
        [sys.executable, "-c", "import dashboard.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert f'Environment variable "{name}" invalid' in last_line and expects in last_line


def settings_in_a_fresh_process(expression: str, **environ: str) -> str:
    """Evaluate `expression` on dashboard.settings in a process whose environment is this one's plus `environ`,
    without the variables a test run sets (as `make run` starts it on a fresh machine)."""
    env = {k: v for k, v in os.environ.items() if k not in {"ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "DASHBOARD_ENV"}}
    result = subprocess.run(
        [sys.executable, "-c", f"from dashboard import settings as s; print({expression})"],
        cwd=ROOT,
        env={**env, **environ},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_make_run_serves_the_local_addresses_without_any_configuration() -> None:
    assert settings_in_a_fresh_process("s.ALLOWED_HOSTS") == "['127.0.0.1', 'localhost', 'testserver']"


def test_a_list_variable_is_read_item_by_item() -> None:
    hosts = settings_in_a_fresh_process("s.ALLOWED_HOSTS", ALLOWED_HOSTS=" dash.example.com , ,10.0.0.5")
    assert hosts == "['dash.example.com', '10.0.0.5']"
