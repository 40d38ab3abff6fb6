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
