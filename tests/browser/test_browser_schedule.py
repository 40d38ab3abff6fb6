"""Scheduled starts and quotas in a real browser (issue 28 parts 3 and 4).

Django's clock is moved by hand (`clock`: the live server runs in this process, so its pages see the moved time);
beat's scan is run here at the moved time (`scheduled_send_due`), and a real Celery worker sends the order to the
simulator. Each test leaves screenshots in test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from billing.quotas import quota_set_by_operator
from rentals.orders.scheduled import scheduled_send_due
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


def pick_two_cheapest(page: Page, fabric_id: str) -> list[str]:
    row = page.get_by_role("row").filter(has=page.get_by_text(fabric_id, exact=True))
    row.get_by_role("link", name="Choose nodes").click()
    expect(page.get_by_role("heading", name="Rent a cluster")).to_be_visible()
    page.get_by_role("link", name="the 2 cheapest").click()
    picked = page.locator("input[name=executor_ids]:checked")
    expect(picked).to_have_count(2)
    return [picked.nth(i).get_attribute("value") or "" for i in range(2)]


def order(page: Page, pod_name: str, start_at: str = "") -> None:
    page.get_by_label("Pod name").fill(pod_name)
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    if start_at:
        page.get_by_label("Start at (UTC)").fill(start_at)
    page.get_by_role("button", name="Rent cluster").click()


def test_a_scheduled_rental_is_sent_at_its_time(
    simulator: Simulator, celery_worker_process, clock, alice, log_in, page: Page, shot: Shot
) -> None:
    clock.now = clock.now.replace(second=0) + timedelta(minutes=1)
    fabric_id = simulator.offers()[0]["fabric_id"]
    log_in("alice")
    pick_two_cheapest(page, fabric_id)
    start = clock.now + timedelta(hours=1)
    order(page, "nine-tomorrow", start.strftime("%Y-%m-%dT%H:%M"))
    page.wait_for_url(RENTAL_URL)
    expect(page.get_by_test_id("status")).to_have_text("Scheduled")
    expect(page.get_by_test_id("start-at")).to_contain_text(f"{start:%Y-%m-%d %H:%M} UTC")
    shot(page, "scheduled")
    assert simulator.ledger() == [], "nothing is rented before its time"

    clock.advance(minutes=59)
    assert scheduled_send_due()["sent"] == 0
    clock.advance(minutes=1)
    assert scheduled_send_due()["sent"] == 1
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text(re.compile("Rented|Ready"), timeout=60_000)
    assert len(simulator.ledger()) == 1, "sent once, through the normal engine"
    shot(page, "sent")


def test_a_scheduled_rental_whose_nodes_are_gone_ends_refused_with_the_reason(
    simulator: Simulator, clock, alice, log_in, page: Page, shot: Shot
) -> None:
    fabric_id = simulator.offers()[0]["fabric_id"]
    log_in("alice")
    node_ids = pick_two_cheapest(page, fabric_id)
    order(page, "gone-by-then", (clock.now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"))
    page.wait_for_url(RENTAL_URL)
    expect(page.get_by_test_id("status")).to_have_text("Scheduled")

    # Meanwhile another Lium account rents one of those very nodes.
    taken = httpx.post(
        simulator.api_url + "/executors/cluster/rent",
        json={
            "executor_uuids": [node_ids[0], *other_free(simulator, fabric_id, node_ids)],
            "pod_name": "someone",
            "user_public_key": [SSH_KEY],
        },
        headers={"X-API-Key": "sim-other-key", "Idempotency-Key": str(uuid.uuid4())},
        timeout=10,
    )
    assert taken.status_code == 200, taken.text
    clock.advance(hours=2)
    assert scheduled_send_due()["refused"] == 1
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("Refused")
    banner = page.locator("#progress .banner")
    expect(banner).to_contain_text("Your scheduled order was not sent at its time.")
    expect(banner).to_contain_text("no longer free on this fabric")
    assert len(simulator.ledger()) == 1, "only the other account's cluster was rented"
    shot(page, "refused")


def other_free(simulator: Simulator, fabric_id: str, mine: list[str]) -> list[str]:
    """One more free node of the fabric that is not one of ours (a cluster takes at least two)."""
    fabric = next(f for f in simulator.offers() if f["fabric_id"] == fabric_id)
    return [next(n["id"] for n in fabric["nodes"] if n["id"] not in mine)]


def test_a_gpu_quota_refuses_the_next_rental_by_name_in_the_form(
    simulator: Simulator, alice, acme, log_in, page: Page, shot: Shot
) -> None:
    fabric_id = simulator.offers()[0]["fabric_id"]
    gpus = int(simulator.offers()[0]["nodes"][0]["gpu_count"]) * 2  # two whole nodes of the first fabric
    quota_set_by_operator(customer=acme, max_gpus=gpus, max_clusters=None, max_hourly_usd=None)
    log_in("alice")
    pick_two_cheapest(page, fabric_id)
    expect(page.get_by_test_id("quota-left")).to_contain_text(f"{gpus} GPUs at once left of {gpus}")
    order(page, "first")
    page.wait_for_url(RENTAL_URL)

    page.goto("/fabrics/")
    pick_two_cheapest(page, fabric_id)
    expect(page.get_by_test_id("quota-left")).to_contain_text(f"0 GPUs at once left of {gpus}")
    order(page, "second")
    expect(page.get_by_role("alert").first).to_contain_text("Quota of GPUs at once reached")
    shot(page, "quota-refused")
