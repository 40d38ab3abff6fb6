"""A customer's journey in a real browser: log in, browse fabrics, pick nodes, rent, watch, copy, terminate.

Chromium talks to the live server; a real Celery worker makes the rent call to the simulator over HTTP, and
the rental page follows it through htmx polling (never a reload). Each test leaves screenshots in
test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import SSH_KEY, Simulator
from tests.matching import must_search

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]
RENTAL_URL = re.compile(r"/rentals/[0-9a-f-]{36}/$")


def open_fabric(page: Page, fabric_id: str) -> None:
    """From the fabrics page, follow a fabric's "Choose nodes" link."""
    row = page.get_by_role("row").filter(has=page.get_by_text(fabric_id, exact=True))
    row.get_by_role("link", name="Choose nodes").click()
    expect(page.get_by_role("heading", name="Rent a cluster")).to_be_visible()


def submit_order(page: Page, pod_name: str) -> None:
    page.get_by_label("Pod name").fill(pod_name)
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    page.get_by_role("button", name="Rent cluster").click()
    page.wait_for_url(RENTAL_URL)


def test_alice_rents_watches_copies_and_terminates(
    simulator: Simulator, celery_worker_process, alice, log_in, page: Page, shot: Shot
) -> None:
    fabric_id = simulator.offers()[0]["fabric_id"]  # the H100 fabric, 8 free nodes
    log_in("alice")
    expect(page.get_by_role("heading", name="Fabrics with free nodes")).to_be_visible()
    expect(page.get_by_text(fabric_id, exact=True)).to_be_visible()
    shot(page, "fabrics")

    open_fabric(page, fabric_id)
    page.get_by_role("link", name="the 2 cheapest").click()
    checked = page.locator("input[name=executor_ids]:checked")
    expect(checked).to_have_count(2)
    summary = page.locator("#summary")
    expect(summary).to_contain_text("2 nodes")
    per_hour_two = must_search(r"\$([\d.]+)/hour", summary.inner_text()).group(1)

    # Toggling a node recomputes the summary in place (htmx), without leaving the page.
    page.evaluate("window.__samePage = true")
    third_id = page.locator("input[name=executor_ids]:not(:checked)").first.get_attribute("id")
    third = page.locator(f"[id='{third_id}']")
    third.check()
    expect(summary).to_contain_text("3 nodes")
    expect(summary).not_to_contain_text(f"${per_hour_two}/hour")
    third.uncheck()
    expect(summary).to_contain_text("2 nodes")
    expect(summary).to_contain_text(f"${per_hour_two}/hour")
    assert page.evaluate("window.__samePage") is True
    page.get_by_label("Pod name").fill("train-browser")
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    shot(page, "rent-form")

    page.get_by_role("button", name="Rent cluster").click()
    page.wait_for_url(RENTAL_URL)
    rental_url = page.url
    expect(page.locator(".stepper li")).to_have_count(5)
    shot(page, "rental-progress")

    # The page reaches Ready through htmx polling alone.
    page.evaluate("window.__samePage = true")
    status = page.get_by_test_id("status")
    expect(status).to_have_text("Ready", timeout=60_000)
    assert page.evaluate("window.__samePage") is True, "the page was reloaded"
    assert page.url == rental_url
    expect(page.locator(".stepper li.current")).to_have_text("Ready")
    expect(page.get_by_test_id("members").locator("tbody tr")).to_have_count(2)
    hostfile = page.get_by_test_id("hostfile")
    expect(hostfile).to_contain_text("10.42.0.1 slots=")
    expect(page.locator("#torchrun")).to_contain_text("--nnodes 2")
    shot(page, "cluster-ready")

    copy = page.get_by_role("button", name="Copy the hostfile")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == hostfile.inner_text().strip()

    # The polled section is shared by everyone polling this version, so its forms carry no CSRF field; they
    # submit the page's token, held outside the section by a field that names the form (its `form` attribute).
    expect(page.locator('#progress input[name="csrfmiddlewaretoken"]')).to_have_count(0)
    page.get_by_label("Remove automatically in").fill("48")
    page.get_by_role("button", name="Schedule removal").click()
    expect(page.get_by_text(re.compile("Every member will be removed at"))).to_be_visible()
    shot(page, "removal-scheduled")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="My rentals").click()
    expect(page.get_by_role("heading", name="My rentals")).to_be_visible()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="train-browser"))
    expect(row).to_contain_text("Ready")
    shot(page, "my-rentals")

    row.get_by_role("link", name="train-browser").click()
    page.get_by_role("link", name="Terminate cluster…").click()
    expect(page.get_by_role("heading", name=re.compile("Terminate cluster"))).to_be_visible()
    page.get_by_label("Reason (optional)").fill("done training")
    shot(page, "terminate-confirm")
    page.get_by_role("button", name="Terminate cluster").click()
    page.wait_for_url(rental_url)
    expect(page.get_by_text("Removing the cluster.")).to_be_visible()
    expect(status).to_have_text(re.compile("Terminating|Terminated"))
    shot(page, "terminating")
    expect(status).to_have_text("Terminated", timeout=60_000)
    expect(page.locator("#progress .banner")).to_contain_text("The cluster was removed.")
    shot(page, "terminated")


def test_a_refused_order_shows_the_upstream_message_and_request_id(
    simulator: Simulator, celery_worker_process, alice, log_in, page: Page, shot: Shot
) -> None:
    fabric_id = simulator.offers()[0]["fabric_id"]
    log_in("alice")
    open_fabric(page, fabric_id)
    page.get_by_role("link", name="the 2 cheapest").click()
    picked = page.locator("input[name=executor_ids]:checked")
    expect(picked).to_have_count(2)
    node_ids = [picked.nth(i).get_attribute("value") for i in range(2)]
    # While alice fills in the form, another Lium account rents those very nodes; Lium refuses her order.
    taken = httpx.post(
        simulator.api_url + "/executors/cluster/rent",
        json={"executor_uuids": node_ids, "pod_name": "someone-else", "user_public_key": [SSH_KEY]},
        headers={"X-API-Key": "sim-other-key", "Idempotency-Key": str(uuid.uuid4())},
        timeout=10,
    )
    assert taken.status_code == 200, taken.text
    submit_order(page, "too-late")

    expect(page.get_by_test_id("status")).to_have_text("Refused", timeout=30_000)
    banner = page.locator("#progress .banner")
    expect(banner).to_contain_text("Lium refused the order")
    expect(banner).to_contain_text(f"Lium said: Executor {node_ids[0]} is not free")
    refusal = next(r for r in simulator.requests() if r["status"] == 409)
    expect(banner).to_contain_text(f"Request id for support: {refusal['request_id']}")
    attempts = page.get_by_test_id("attempts").locator("tbody tr")
    expect(attempts).to_have_count(1)
    expect(attempts.first).to_contain_text("executor_not_available")
    expect(page.get_by_role("link", name="Terminate cluster…")).to_have_count(0)
    shot(page, "refused")


def test_a_replayed_answer_is_labelled_and_listed_in_the_attempts(
    simulator: Simulator, celery_worker_process, alice, log_in, page: Page, shot: Shot
) -> None:
    simulator.faults([{"fault": "drop_after_commit", "next": 1}])
    fabric_id = simulator.offers()[0]["fabric_id"]
    log_in("alice")
    open_fabric(page, fabric_id)
    page.get_by_role("link", name="the 2 cheapest").click()
    expect(page.locator("input[name=executor_ids]:checked")).to_have_count(2)
    submit_order(page, "replay-browser")

    expect(page.get_by_test_id("replayed")).to_have_text("replayed answer", timeout=30_000)
    rows = page.get_by_test_id("attempts").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(1).locator("td").nth(4)).to_have_text("yes")
    expect(rows.nth(0).locator("td").nth(4)).to_have_text("no")
    expect(page.get_by_test_id("status")).to_have_text(re.compile("Rented, nodes starting|Ready"))
    shot(page, "replayed")
    assert len(simulator.ledger()) == 1, "the repeat did not rent a second cluster"


def test_upstream_errors_show_a_banner_not_a_500(simulator: Simulator, alice, log_in, page: Page, shot: Shot) -> None:
    simulator.faults([{"fault": "error_before_commit", "route": "offers", "status": 503}])
    log_in("alice")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The Lium API could not list the fabrics right now")
    expect(page.get_by_text("No fabric matches.")).to_be_visible()
    shot(page, "fabrics-upstream-error")

    page.get_by_role("link", name="Refresh").click()
    expect(alert).to_contain_text("could not list the fabrics")

    # A rent link followed while the listing cannot be read comes back to the same customer's fabrics, with the reason.
    page.goto("/rent/?fabric=hot%3Ainfiniband%3A0x3%3A0x7fff%3ANVIDIA+H100+80GB+HBM3%3A8&cheapest=2")
    page.wait_for_url(re.compile(r"/fabrics/\?customer=\d+$"))
    expect(page.locator(".banner.error").first).to_contain_text("could not list the fabrics")
    shot(page, "rent-upstream-error")


def test_summary_survives_the_listing_failing_mid_selection(
    simulator: Simulator, alice, log_in, page: Page, shot: Shot, browser_problems
) -> None:
    """The rent form is open; then the upstream starts failing and the user toggles a node."""
    from django.core.cache import cache

    fabric_id = simulator.offers()[0]["fabric_id"]
    log_in("alice")
    open_fabric(page, fabric_id)
    simulator.faults([{"fault": "error_before_commit", "route": "offers", "status": 503}])
    cache.clear()  # as if the 15 s offers cache had expired
    page.locator("input[name=executor_ids]").first.check()
    summary = page.locator("#summary")
    expect(summary).to_contain_text(re.compile("could not|not offered", re.I), timeout=3_000)
    shot(page, "summary-upstream-error")
    simulator.faults([])
    page.locator("input[name=executor_ids]").nth(1).check()
    expect(page.locator("#summary")).to_contain_text("2 nodes")


def test_ssh_keys_profile_saves_a_key_that_the_rent_form_offers(
    simulator: Simulator, alice, log_in, page: Page, shot: Shot
) -> None:
    log_in("alice")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="SSH keys").click()
    expect(page.get_by_role("heading", name="Your SSH keys")).to_be_visible()
    expect(page.get_by_text("No saved keys yet.")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("laptop")
    page.get_by_label(re.compile("Public key", re.I)).fill(SSH_KEY)
    page.get_by_role("button", name="Save key").click()
    expect(page.get_by_role("status")).to_contain_text("Key saved")
    expect(page.get_by_role("cell", name="laptop", exact=True)).to_be_visible()
    shot(page, "ssh-keys")

    page.goto("/fabrics/")
    open_fabric(page, simulator.offers()[0]["fabric_id"])
    expect(page.get_by_label(re.compile("laptop"))).to_be_checked()


def test_keyboard_reaches_login_and_rent_with_a_visible_focus(
    simulator: Simulator, alice, page: Page, shot: Shot
) -> None:
    def focused_outline() -> str:
        return page.evaluate(
            "(() => { const s = getComputedStyle(document.activeElement);"
            " return s.outlineStyle + ' ' + s.outlineWidth; })()"
        )

    def tab_to(selector: str, limit: int = 80) -> None:
        target = page.locator(selector)
        for _ in range(limit):
            page.keyboard.press("Tab")
            if target.evaluate("element => element === document.activeElement"):
                return
        raise AssertionError(f"{selector} is not reachable with Tab")

    page.goto("/accounts/login/")
    tab_to("#id_login")
    assert focused_outline() not in ("none 0px", ""), "the focused username field shows a focus ring"
    page.keyboard.type("alice")
    page.keyboard.press("Tab")
    page.keyboard.type("pw")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Log in"
    assert focused_outline().startswith("solid"), "the focused button shows a focus ring"
    shot(page, "login-focus")
    page.keyboard.press("Enter")
    page.wait_for_url("**/fabrics/")

    open_fabric(page, simulator.offers()[0]["fabric_id"])
    page.get_by_role("link", name="the 2 cheapest").click()
    page.get_by_label("Pod name").fill("keyboard")
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    page.get_by_label("SSH public keys").focus()
    tab_to("button.primary[type=submit]")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Rent cluster"
    assert focused_outline().startswith("solid"), "the focused submit button shows a focus ring"
    shot(page, "rent-submit-focus")
