"""Drive Debian's Chromium through the containerised dashboard: log in, rent 2 nodes, ready, terminate.

Run by scripts/compose_smoke.sh against the compose stack (production settings). The browser sends
`X-Forwarded-Proto: https`, as the TLS proxy in front of `web` would. A second rental is held in the
simulator's rent call while `--crash-worker` kills the worker container; the rental must still become Ready
once the worker is back. A third is held there while `--restart-services` restarts the postgres and redis
containers: it must settle truthfully (Ready with the one cluster the simulator's ledger has for its pod name, or
a state saying nothing was rented with none in the ledger). Fails (exit 1) on any console error, page error or
5xx answer, except the 503s (and the browser's console lines about them) while the database restarts.

    python scripts/compose_walk.py --base-url http://127.0.0.1:8000 --simulator-url http://127.0.0.1:8100 \
        --user alice --operator olga --password-env USER_PASSWORD --crash-worker 'kill -KILL 1234'

With `--rent POD` it only logs in and orders one rental (waiting for Ready with `--wait-ready`, else only for
the worker to pick it up), prints its URL and leaves it running: scripts/compose_upgrade.sh uses that.

Screenshots land in test-artifacts/compose/.
"""

from __future__ import annotations

import argparse
import base64
import hmac
import os
import re
import shlex
import struct
import subprocess
import sys
import time
from pathlib import Path

import httpx
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Response, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# The same flags as tests/browser/conftest.py: headless, no sandbox (root in CI), no background traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ smoke@ci"
RENTAL_URL = re.compile(r"/rentals/[0-9a-f-]{36}/$")
SHOTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "compose"


def say(message: str) -> None:
    print(f"compose_walk: {message}", flush=True)


class Problems(list[str]):
    """Console errors, page errors and 5xx answers the browser saw. While `outage` is set (the database
    restarting), a 503 is the answer the page owes, not a problem: those are counted in `outage_503s`."""

    outage = False
    outage_503s = 0

    def watch(self, page: Page) -> None:
        page.on("console", self.on_console)
        page.on("pageerror", lambda error: self.append(f"page error: {error}"))
        page.on("response", self.on_response)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        if self.outage and "503" in message.text:
            return  # the browser's own line about the 503 below
        self.append(f"console.{message.type}: {message.text}")

    def on_response(self, response: Response) -> None:
        if response.status == 503 and self.outage:
            self.outage_503s += 1
        elif response.status >= 500:
            self.append(f"HTTP {response.status} for {response.request.method} {response.url}")


def new_context(browser: Browser, base_url: str) -> BrowserContext:
    """A fresh browser profile on the dashboard, sending what the TLS proxy in front of web would."""
    context = browser.new_context(
        base_url=base_url, viewport={"width": 1280, "height": 900}, extra_http_headers={"X-Forwarded-Proto": "https"}
    )
    context.set_default_timeout(20_000)
    return context


def totp_code(secret: str) -> str:
    """The authenticator app's current code for `secret` (RFC 6238: base32 key, 30 s steps, six digits)."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    digest = hmac.new(key, struct.pack(">Q", int(time.time()) // 30), "sha1").digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset : offset + 4])[0] & 0x7FFFFFFF) % 1_000_000:06d}"


def totp_enrol(page: Page) -> None:
    """Set up the authenticator app on the enrolment page a first sign-in of staff lands on in production."""
    secret = page.locator("#authenticator_secret").input_value()
    page.locator("input[name=code]").fill(totp_code(secret))
    page.get_by_role("button", name="Activate").click()
    expect(page.locator("input[name=code]")).to_have_count(0)


def log_in(context: BrowserContext, problems: Problems, username: str, password: str, landing: str) -> Page:
    page = context.new_page()
    problems.watch(page)
    page.goto("/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(landing)
    return page


def rent_two_nodes(page: Page, pod_name: str) -> str:
    """From the fabrics page, rent the 2 cheapest nodes of the first fabric; return the rental's URL."""
    page.goto("/fabrics/")
    expect(page.get_by_role("heading", name="Fabrics with free nodes")).to_be_visible()
    page.get_by_role("link", name="Choose nodes").first.click()
    expect(page.get_by_role("heading", name="Rent a cluster")).to_be_visible()
    page.get_by_role("link", name="the 2 cheapest").click()
    expect(page.locator("input[name=executor_ids]:checked")).to_have_count(2)
    page.get_by_label("Pod name").fill(pod_name)
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    page.get_by_role("button", name="Rent cluster").click()
    try:
        page.wait_for_url(RENTAL_URL)
    except PlaywrightTimeoutError:
        # The form came back: say what it objected to, not only that no rental page appeared.
        page.screenshot(path=str(SHOTS / f"rent-{pod_name}-refused.png"), full_page=True)
        alerts = [text.strip() for text in page.get_by_role("alert").all_inner_texts()]
        raise SystemExit(f"compose_walk: the rent form for {pod_name} came back: {alerts or 'no message'}") from None
    return page.url


def terminate(page: Page, rental_url: str) -> None:
    page.goto(rental_url)
    page.get_by_role("link", name="Terminate cluster…").click()
    page.get_by_role("button", name="Terminate cluster").click()
    page.wait_for_url(rental_url)
    expect(page.get_by_test_id("status")).to_have_text("Terminated", timeout=90_000)


def simulator_faults(simulator_url: str, rules: list[dict]) -> None:
    httpx.post(simulator_url + "/_sim/faults", json={"seed": 1, "rules": rules}, timeout=10).raise_for_status()


# What the page may end on after the restarts, and whether the upstream then holds a cluster for it.
SETTLED_HOLDING = ("Ready", "Degraded")
SETTLED_EMPTY = ("Refused", "Failed", "Not rented")


def ledger_clusters(simulator_url: str, pod_name: str) -> set[str]:
    """Return the cluster ids the simulator's ledger committed for `pod_name`."""
    body = httpx.get(simulator_url + "/_sim/ledger", timeout=10).raise_for_status().json()
    entries = body["ledger"] if isinstance(body, dict) else body
    return {str(entry.get("cluster_id")) for entry in entries if entry.get("pod_name") == pod_name}


def rent_through_restarts(page: Page, problems: Problems, args: argparse.Namespace) -> None:
    """Hold a rent call in the simulator, restart the postgres and redis containers meanwhile, and check the
    rental settles on what the upstream really did."""
    simulator_faults(args.simulator_url, [{"fault": "slow_commit", "next": 1, "seconds": 8}])
    url = rent_two_nodes(page, "smoke-restarts")
    status = page.get_by_test_id("status")
    expect(status).to_have_text(re.compile("Sending|Retrying|Rented, nodes starting"), timeout=30_000)
    say(f"third rental in flight ({status.inner_text()}): restarting the postgres and redis containers")
    problems.outage = True
    subprocess.run(shlex.split(args.restart_services), check=True)  # noqa: S603 - the smoke script's command
    settled = re.compile("|".join(SETTLED_HOLDING + SETTLED_EMPTY))
    # The page's polls meet the restart (503s) and go on once the database is back: reload to be sure.
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        page.goto(url)
        if page.get_by_test_id("status").count() and settled.fullmatch(status.inner_text().strip()):
            break
        time.sleep(3)
    problems.outage = False
    shown = status.inner_text().strip()
    page.screenshot(path=str(SHOTS / "04-after-restarts.png"), full_page=True)
    clusters = ledger_clusters(args.simulator_url, "smoke-restarts")
    truthful = (shown in SETTLED_HOLDING and len(clusters) == 1) or (shown in SETTLED_EMPTY and not clusters)
    if not truthful:
        raise SystemExit(f"compose_walk: after the restarts the page says {shown!r}; the ledger has {clusters}")
    say(
        f"third rental settled after the restarts as {shown} ({len(clusters)} cluster(s) in the ledger, "
        f"{problems.outage_503s} answers 503 meanwhile): {url}"
    )
    if shown in SETTLED_HOLDING:
        terminate(page, url)  # the smoke script counts it among the terminated rentals


def walk(args: argparse.Namespace) -> None:
    password = os.environ[args.password_env]
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = Problems()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = log_in(new_context(browser, args.base_url), problems, args.user, password, "**/fabrics/")
            say(f"{args.user} logged in")

            first = rent_two_nodes(page, "smoke-first")
            status = page.get_by_test_id("status")
            expect(status).to_have_text("Ready", timeout=90_000)
            expect(page.get_by_test_id("members").locator("tbody tr")).to_have_count(2)
            page.screenshot(path=str(SHOTS / "01-ready.png"), full_page=True)
            say(f"first rental ready: {first}")
            terminate(page, first)
            page.screenshot(path=str(SHOTS / "02-terminated.png"), full_page=True)
            say("first rental terminated")

            # The next rent call is held 8 s inside the simulator: the worker dies in the middle of it.
            simulator_faults(args.simulator_url, [{"fault": "slow_commit", "next": 1, "seconds": 8}])
            second = rent_two_nodes(page, "smoke-crash")
            expect(status).to_have_text(re.compile("Sending|Retrying|Rented, nodes starting"), timeout=30_000)
            say(f"second rental in flight ({status.inner_text()}): crashing the worker")
            subprocess.run(shlex.split(args.crash_worker), check=True)  # noqa: S603 - the smoke script's command
            expect(status).to_have_text("Ready", timeout=240_000)
            page.screenshot(path=str(SHOTS / "03-ready-after-crash.png"), full_page=True)
            say(f"second rental settled after the worker restart: {second}")
            if args.restart_services:
                rent_through_restarts(page, problems, args)

            # Staff must have two-factor in production (MFA_REQUIRED_FOR_STAFF): the first sign-in enrols.
            operator = log_in(
                new_context(browser, args.base_url), problems, args.operator, password, "**/2fa/totp/activate/"
            )
            totp_enrol(operator)
            say(f"operator {args.operator} set up two-factor at the first sign-in")
            operator.goto("/ops/")
            expect(operator.get_by_role("heading", name="Operations")).to_be_visible()
            operator.goto(second)
            expect(operator.get_by_test_id("status")).to_have_text("Ready")
            say(f"operator {args.operator} sees the rental")
            terminate(operator, second)
            say("second rental terminated by the operator")
        finally:
            for n, last in enumerate(p for c in browser.contexts for p in c.pages):
                last.screenshot(path=str(SHOTS / f"last-{n}.png"), full_page=True)  # where each page ended
            browser.close()
    if problems:
        raise SystemExit("compose_walk: the browser saw problems:\n" + "\n".join(problems))


def rent_only(args: argparse.Namespace) -> None:
    """Order one rental and leave it running; print its URL."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = Problems()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = log_in(
                new_context(browser, args.base_url), problems, args.user, os.environ[args.password_env], "**/fabrics/"
            )
            url = rent_two_nodes(page, args.rent)
            expected = "Ready" if args.wait_ready else re.compile("Sending|Retrying|Rented, nodes starting|Ready")
            expect(page.get_by_test_id("status")).to_have_text(expected, timeout=90_000)
            page.screenshot(path=str(SHOTS / f"rent-{args.rent}.png"), full_page=True)
        finally:
            browser.close()
    if problems:
        raise SystemExit("compose_walk: the browser saw problems:\n" + "\n".join(problems))
    print(url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--simulator-url", required=True)
    parser.add_argument("--user", required=True, help="a customer member")
    parser.add_argument("--operator", help="an operator (the full walk)")
    parser.add_argument("--password-env", required=True, help="environment variable with both users' password")
    parser.add_argument("--crash-worker", help="command that kills the worker container (the full walk)")
    parser.add_argument(
        "--restart-services", help="command that restarts the postgres and redis containers (a third rental)"
    )
    parser.add_argument("--rent", metavar="POD", help="only order one rental named POD and print its URL")
    parser.add_argument("--wait-ready", action="store_true", help="with --rent: wait until it is Ready")
    args = parser.parse_args()
    if args.rent:
        rent_only(args)
        return 0
    if not (args.operator and args.crash_worker):
        parser.error("the full walk needs --operator and --crash-worker")
    started = time.monotonic()
    walk(args)
    say(f"walk passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
