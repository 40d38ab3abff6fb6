"""A keyboard alone rents a cluster: Tab, Space, Enter (and typing into text fields) — never the mouse.

Every stop on the way must show its focus ring (the :focus-visible outline of static/css/site.css), in light and
dark. The rental page announces each change of status: a poll's answer lands in the page's polite live region.
The rent call is made in-process by the test (`rentals.enqueue._enqueue` is a no-op), so the page's poll is what
brings the news.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SSH_KEY, Simulator

try:
    from playwright.sync_api import Locator, Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

from rentals import engine
from rentals.models import Rental

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]
RENTAL_URL = re.compile(r"/rentals/[0-9a-f-]{36}/$")


class Keyboard:
    """Moves the focus with Tab only, and checks that every element it lands on shows a focus ring."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.stops = 0

    def focused(self) -> tuple[str, str, str]:
        """What has the focus, and its outline's style and width."""
        found = self.page.evaluate(
            "(() => { const e = document.activeElement, s = getComputedStyle(e);"
            " return [e.outerHTML.slice(0, 80), s.outlineStyle, s.outlineWidth]; })()"
        )
        return found[0], found[1], found[2]

    def tab_to(self, target: Locator | str, limit: int = 120) -> None:
        target = self.page.locator(target).first if isinstance(target, str) else target
        for _ in range(limit):
            self.page.keyboard.press("Tab")
            self.stops += 1
            element, style, width = self.focused()
            if not element.startswith("<body"):  # past the last element the focus leaves the page, then comes back
                assert style != "none" and width != "0px", f"no visible focus on {element}: {style} {width}"
            if target.evaluate("element => element === document.activeElement"):
                return
        raise AssertionError(f"{target} is not reachable with Tab")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_keyboard_alone_rents_a_cluster_and_hears_it_rented(
    scheme: str, simulator: Simulator, monkeypatch: pytest.MonkeyPatch, alice, page: Page, shot: Shot
) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    keys = Keyboard(page)
    fabric_id = simulator.offers()[0]["fabric_id"]

    page.goto("/accounts/login/")
    keys.tab_to(page.get_by_label("Username"))
    page.keyboard.type("alice")
    keys.tab_to(page.get_by_label("Password"))
    page.keyboard.type("pw")
    keys.tab_to(page.get_by_role("button", name="Log in"))
    page.keyboard.press("Enter")
    page.wait_for_url("**/fabrics/")

    # The fabric's "Choose nodes" link, then the node picker: Space ticks two nodes, the summary follows.
    row = page.get_by_role("row").filter(has=page.get_by_text(fabric_id, exact=True))
    keys.tab_to(row.get_by_role("link", name="Choose nodes"))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Rent a cluster")).to_be_visible()
    boxes = page.locator("input[name=executor_ids]:not([disabled])")
    for index in (0, 1):
        keys.tab_to(boxes.nth(index))
        page.keyboard.press("Space")
    expect(page.locator("input[name=executor_ids]:checked")).to_have_count(2)
    expect(page.locator("#summary")).to_contain_text("2 nodes")
    shot(page, f"picker-{scheme}")

    keys.tab_to("#id_pod_name")
    page.keyboard.type(f"keys-{scheme}")
    keys.tab_to("#id_ssh_public_keys")
    page.keyboard.type(SSH_KEY)
    keys.tab_to("button.primary[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(RENTAL_URL)

    # The progress page: its live region is on the page before anything changes, and a poll's news lands in it.
    announce = page.get_by_test_id("progress-announce")
    expect(announce).to_have_attribute("aria-live", "polite")
    expect(announce).to_have_attribute("role", "status")
    rental = Rental.objects.get(pod_name=f"keys-{scheme}")
    engine.rental_attempt(rental_id=rental.pk)
    rental.refresh_from_db()
    assert rental.cluster_id, rental.error_message
    expect(announce).to_contain_text(f"keys-{scheme}: Rented", timeout=30_000)
    expect(page.get_by_test_id("status")).to_contain_text("Rented")

    # On the progress page the keyboard reaches the terminate link; Enter opens the confirm page.
    keys.tab_to("a.danger")
    shot(page, f"progress-focus-{scheme}")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=re.compile("Terminate cluster"))).to_be_visible()
    keys.tab_to("button.danger[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(RENTAL_URL)
    rental.refresh_from_db()
    assert rental.status in ("terminating", "terminated"), rental.status
    assert keys.stops > 10


def test_the_focus_ring_is_drawn_by_the_site_stylesheet(alice, log_in, page: Page) -> None:
    """A focused link, button and field get site.css's 3 px solid outline in the accent colour, not the
    browser's default ring (which some themes hide)."""
    log_in("alice")
    for selector in ("nav[aria-label=Main] a", "button[type=submit]", "select"):
        page.locator("body").focus()
        element = page.locator(selector).first
        element.focus()
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Tab")  # focused from the keyboard: :focus-visible applies
        style = element.evaluate("e => { const s = getComputedStyle(e); return [s.outlineStyle, s.outlineWidth]; }")
        assert style == ["solid", "3px"], f"{selector}: {style}"
