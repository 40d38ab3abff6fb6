"""Issue 27 in a real browser against the simulator's pods over SSH: a verified rental shows its measured bus
bandwidth and becomes Ready; with one slow member the check fails naming it, and "rent again without it" yields a
Ready cluster that excludes it. After every check the dashboard's key is gone from every member."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]
RENTAL_URL = re.compile(r"/rentals/[0-9a-f-]{36}/$")


def rental_on(page: Page) -> Rental:
    return Rental.objects.get(public_id=uuid.UUID(page.url.rstrip("/").rsplit("/", 1)[-1]))


def keys_left(simulator: Simulator, rental: Rental) -> set[str]:
    found: set[str] = set()
    for member in rental.members.all():
        found |= set(simulator.http.get(f"/_sim/pods/{member.pod_id}/authorized-keys").json()["authorized_keys"])
    return found


def rent_verified(page: Page, fabric_id: str, cheapest: int, pod_name: str, slow_index: int | None = None) -> str:
    """Pick the 2 cheapest nodes (and the next listed up to N) and tick the fabric check; return the executor at
    `slow_index` (to make slow before renting), or ""."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Fabrics").click()
    row = page.get_by_role("row").filter(has=page.get_by_text(fabric_id, exact=True))
    row.get_by_role("link", name="Choose nodes").click()
    page.get_by_role("link", name="the 2 cheapest").click()
    checked = page.locator("input[name=executor_ids]:checked")
    expect(checked).to_have_count(2)
    for count in range(3, cheapest + 1):
        page.locator("input[name=executor_ids]:not(:checked)").first.check()
        expect(checked).to_have_count(count)
    slow = ""
    if slow_index is not None:
        slow = str(checked.nth(slow_index).get_attribute("value"))
    page.get_by_label("Pod name").fill(pod_name)
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    page.get_by_label("Verify the fabric before hand-over").check()
    return slow


def test_verified_passes_then_a_slow_node_is_named_and_rented_again_without(
    simulator: Simulator, celery_worker_process, alice, log_in, page: Page, shot: Shot
) -> None:
    simulator.http.post("/_sim/config", json={"ssh": True}).raise_for_status()
    fabric_id = simulator.offers()[0]["fabric_id"]  # H100, 400 Gb/s: 2880 Gb/s healthy, floor 2240
    log_in("alice")

    rent_verified(page, fabric_id, 2, "verified-ok")
    page.get_by_role("button", name="Rent cluster").click()
    page.wait_for_url(RENTAL_URL)
    expect(page.get_by_test_id("status")).to_have_text("Ready", timeout=90_000)
    expect(page.get_by_test_id("bus-bandwidth")).to_have_text("2880 Gb/s")
    expect(page.get_by_test_id("check-key-removed")).to_be_visible()
    shot(page, "verified-ready")
    first = rental_on(page)
    assert keys_left(simulator, first) == {SSH_KEY}

    slow = rent_verified(page, fabric_id, 3, "verified-slow", slow_index=1)
    simulator.http.post("/_sim/config", json={"slow_executors": [slow]}).raise_for_status()
    page.get_by_role("button", name="Rent cluster").click()
    page.wait_for_url(RENTAL_URL)
    expect(page.get_by_test_id("status")).to_have_text("Fabric check failed", timeout=90_000)
    expect(page.get_by_test_id("slow-members")).to_contain_text(slow)
    expect(page.get_by_test_id("check-pairs")).to_be_visible()
    shot(page, "check-failed")
    failed = rental_on(page)
    assert keys_left(simulator, failed) == {SSH_KEY}

    page.get_by_test_id("check-rent-again").click()
    page.wait_for_url(RENTAL_URL)
    assert page.url != failed and rental_on(page).pk != failed.pk
    expect(page.get_by_test_id("status")).to_have_text("Ready", timeout=90_000)
    shot(page, "rented-again")
    again = rental_on(page)
    assert slow not in again.executor_ids and len(again.executor_ids) == 3
    assert keys_left(simulator, again) == {SSH_KEY}
    failed.refresh_from_db()
    assert failed.status in ("terminating", "terminated")
