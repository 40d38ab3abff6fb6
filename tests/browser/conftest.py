"""Browser tests: Playwright drives the system's Chromium against the running stack.

The stack is pytest-django's `live_server` (Django in a thread on the test database), a real Celery worker
process (`celery_worker_process`, when a test asks for it) and the simulator over HTTP. Chromium is the
Debian package (`/usr/bin/chromium`, or `CHROMIUM_PATH`); Playwright never downloads a browser.

Locally, a missing Chromium or Playwright skips these tests with a reason; under CI (`CI=true`) it fails them.
Every test saves full-page screenshots under `test-artifacts/screenshots/` and fails on any browser console
error, uncaught page error or 5xx response.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.conftest import REPO_ROOT

# Playwright's sync API runs an event loop in this thread; Django's async-safety check would then refuse the
# ORM calls that fixtures make. The live server runs in its own thread and is not affected.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

try:
    from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None  # type: ignore[assignment]

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
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
SCREENSHOTS = REPO_ROOT / "test-artifacts" / "screenshots"
PASSWORD = "pw"  # the personas' password (tests/conftest.py)


def _missing() -> str:
    if sync_playwright is None:
        return "the playwright package is not installed (uv sync installs the dev group)"
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)"
    return ""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the browser tests last, and skip them with a reason when Chromium or Playwright is missing, except
    under CI. Last: Playwright's sync API keeps an event loop running in the main thread for the rest of the
    session, and code that runs its own loop (`asyncio.run`: the fabric check, the SSH contract tests) then fails."""
    items.sort(key=lambda item: "browser" in item.keywords)  # stable: every other test keeps its place
    reason = _missing()
    if not reason or os.environ.get("CI") == "true":
        return
    skip = pytest.mark.skip(reason=f"browser tests need Chromium and Playwright: {reason}")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the session; Playwright gives it a fresh temporary user-data-dir."""
    reason = _missing()
    if reason:
        pytest.fail(f"CI=true and the browser tests cannot run: {reason}", pytrace=False)
    # The worker's embedded beat keeps its schedule in RUN_DIR; with a Redis broker nothing else creates it
    # (scripts/test.sh's PostgreSQL run uses RUN_DIR/pg), and beat dies without it.
    settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):  # only this run's screenshots
        old.unlink()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class BrowserProblems:
    """Console errors, uncaught page errors and 5xx responses seen during a test."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.allowed: list[re.Pattern[str]] = []

    def allow(self, pattern: str) -> None:
        """Accept console errors matching `pattern` (for a test that provokes them on purpose)."""
        self.allowed.append(re.compile(pattern))

    def add(self, text: str) -> None:
        if not any(pattern.search(text) for pattern in self.allowed):
            self.items.append(text)


@pytest.fixture
def browser_problems() -> BrowserProblems:
    return BrowserProblems()


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Iterator[Callable[..., Path]]:
    """`shot(page, "fabrics")` saves test-artifacts/screenshots/<test>-<n>-fabrics.png (full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    counter = iter(range(1, 100))

    def save(page: Page, label: str) -> Path:
        path = SCREENSHOTS / f"{name}-{next(counter):02d}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    save.test_name = name  # type: ignore[attr-defined]
    yield save


@pytest.fixture
def context(browser: Browser, live_server: Any, transactional_db: None) -> Iterator[BrowserContext]:
    """A fresh browser context (cookies, storage) on the live server, allowed to use the clipboard."""
    from django.core.cache import cache

    cache.clear()  # the offers cache is per credential id, and ids repeat across transactional tests
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    context.set_default_timeout(15_000)
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext, browser_problems: BrowserProblems, shot: Callable[..., Path]) -> Iterator[Page]:
    """A page that records console errors, page errors and 5xx answers; the test fails if there were any.

    It saves test-artifacts/screenshots/<test>.png of wherever the test ended (also when it failed).
    """
    page = context.new_page()
    page.on(
        "console",
        lambda message: browser_problems.add(f"console.{message.type}: {message.text} ({message.location})")
        if message.type == "error"
        else None,
    )
    page.on("pageerror", lambda error: browser_problems.add(f"page error: {error}"))
    page.on(
        "response",
        lambda response: browser_problems.add(f"HTTP {response.status} for {response.request.method} {response.url}")
        if response.status >= 500
        else None,
    )
    yield page
    try:
        page.screenshot(path=str(SCREENSHOTS / f"{shot.test_name}.png"), full_page=True)  # type: ignore[attr-defined]
    except Exception as exc:  # a failed screenshot must not hide the test's own result
        browser_problems.add(f"could not take the final screenshot: {exc}")
    if browser_problems.items:
        pytest.fail("the browser saw problems:\n" + "\n".join(browser_problems.items), pytrace=False)


@pytest.fixture
def log_in(page: Page) -> Callable[[str], Page]:
    """Log a persona in through the login form (password `pw`); lands on the fabrics page."""

    def log_in(username: str) -> Page:
        page.goto("/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/fabrics/")
        return page

    return log_in


_TOTP_CODES_USED: dict[str, set[str]] = {}


def totp_code_once(secret: str) -> str:
    """The authenticator's current code, never one already given for `secret` in this run: allauth takes each code
    once, so a second sign-in in the same 30-second window waits for the next code (up to 30 s)."""
    from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value

    used = _TOTP_CODES_USED.setdefault(secret, set())
    while (code := format_hotp_value(hotp_value(secret, int(time.time()) // 30))) in used:
        time.sleep(0.5)
    used.add(code)
    return code
