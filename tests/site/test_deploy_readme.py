"""The README's "Deploying with Docker Compose" is what scripts/compose_smoke.sh runs, line for line."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

BEGIN, END = "<!-- compose-smoke-steps -->", "<!-- /compose-smoke-steps -->"


def readme_commands() -> list[str]:
    """The shell lines of the README's fenced blocks between the compose-smoke-steps markers."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def smoke_commands() -> list[str]:
    """The commands the smoke script runs (`step '...'`) or notes as done by hand (`by_hand '...'`)."""
    text = (REPO_ROOT / "scripts" / "compose_smoke.sh").read_text()
    return re.findall(r"^(?:step|by_hand) '([^']*)'", text, flags=re.M)


def test_the_smoke_test_runs_the_readme_deploy_steps_in_order() -> None:
    readme = readme_commands()
    assert len(readme) >= 10, "the README lost its deploy steps"
    assert smoke_commands() == readme


def test_the_smoke_test_runs_every_readme_step_rather_than_skipping_it() -> None:
    # Only editing .env (and loading it into the shell) is left to a person; every other line really runs.
    by_hand = re.findall(r"^by_hand '([^']*)'", (REPO_ROOT / "scripts" / "compose_smoke.sh").read_text(), re.M)
    assert by_hand == ["cp deploy/env.example .env", "set -a && . ./.env && set +a"]


def compose_app_variables() -> set[str]:
    """The variables docker-compose.yml passes to every app container (its `x-app-env` block)."""
    text = (REPO_ROOT / "docker-compose.yml").read_text()
    block = text[text.index("x-app-env: &app-env") : text.index("\nx-app: &app")]
    return set(re.findall(r"^  ([A-Z][A-Z0-9_]*):", block, flags=re.M))


def test_the_proxy_settings_the_readme_asks_for_reach_the_containers() -> None:
    # Compose passes only what it lists: a variable the README tells the operator to set in .env but that
    # compose does not pass is silently ignored (TRUSTED_PROXY_COUNT was: every client shared the proxy's
    # address in the login and API-key throttles).
    text = (REPO_ROOT / "README.md").read_text()
    paragraph = text[text.index("Put a TLS-terminating proxy in front") :].split("\n\n", 1)[0]
    asked = set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`", paragraph))
    assert "TRUSTED_PROXY_COUNT" in asked, "the README names the proxy count"
    assert asked <= compose_app_variables(), asked - compose_app_variables()


def test_every_variable_of_env_example_reaches_compose() -> None:
    example = (REPO_ROOT / "deploy" / "env.example").read_text()
    named = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", example, flags=re.M))
    compose = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (REPO_ROOT / "docker-compose.yml").read_text()))
    assert named <= compose, f"set in .env but never read by docker-compose.yml: {sorted(named - compose)}"
