"""Run the local OpenID provider (tests/oidc/provider.mjs, panva's certified oidc-provider on Node.js) for a test.

`oidc_provider_start(...)` installs its locked packages (`npm ci`) when node_modules is missing, starts it on a
free port and waits until its discovery document answers. Without node or npm the SSO tests skip with the reason;
under CI (`CI=true`) they fail instead, so CI never passes by skipping them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, stop_process, wait_for_http

OIDC_DIR = Path(__file__).resolve().parent


def node_missing() -> str:
    """Return why the provider cannot run here ('' when it can)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return (
                "the SSO tests need Node.js and npm to run the OpenID provider: "
                f"no `{tool}` on PATH (apt-get install nodejs npm)"
            )
    return ""


def require_node() -> None:
    reason = node_missing()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)


def npm_ci() -> None:
    """Install the provider's locked packages once (package-lock.json; no network when they are present)."""
    if (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
        return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=OIDC_DIR, check=True, timeout=300)


@dataclass
class OidcProvider:
    issuer: str
    client_id: str
    client_secret: str
    process: subprocess.Popen

    def tamper_next_id_token(self) -> None:
        """Make the provider change the next ID token's payload after signing it (its signature then fails)."""
        httpx.post(f"{self.issuer}/__test/tamper", timeout=5.0).raise_for_status()

    def stop(self) -> None:
        stop_process(self.process)


def oidc_provider_start(*, redirect_uris: list[str], users: list[str], port: int | None = None) -> OidcProvider:
    """Start the provider with one client (these redirect URIs) and these users (e-mail addresses)."""
    require_node()
    npm_ci()
    port = port or free_port()
    env = {
        **os.environ,
        "OIDC_PORT": str(port),
        "OIDC_CLIENT_ID": "dashboard-test",
        "OIDC_CLIENT_SECRET": "dashboard-test-secret-value",
        "OIDC_REDIRECT_URIS": ",".join(redirect_uris),
        "OIDC_USERS": ",".join(users),
    }
    process = subprocess.Popen(
        ["node", "provider.mjs"],
        cwd=OIDC_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{issuer}/.well-known/openid-configuration", process=process, timeout=30.0)
    except BaseException:
        stop_process(process)
        raise
    return OidcProvider(issuer, env["OIDC_CLIENT_ID"], env["OIDC_CLIENT_SECRET"], process)
