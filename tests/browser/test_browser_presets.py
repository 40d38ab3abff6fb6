"""Presets, "Rent again" and capacity watches in a real browser (issue 28 parts 1 and 2).

A preset saved from the rent form and used from the fabric page; "Rent again" on a terminated rental; a watch that
fires when the simulator frees nodes (the beat scan runs in a real worker) and opens the rent form on them; a watch
that rents by itself, exactly once.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from presets.models import CapacityWatch, Preset
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus
from tests.conftest import SSH_KEY, Simulator, start_worker, stop_process
from tests.customer_presets.conftest import H100, cheapest

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]
RENTAL_URL = re.compile(r"/rentals/[0-9a-f-]{36}/$")


@pytest.fixture
def watch_worker(transactional_db: None, tmp_path: Path, settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """A real worker whose beat scans the watches every second, reading offers at most a second old (and the
    web's own cache as fresh: without a shared cache, the page would show the listing it read before the watch
    fired, for a whole LIUM_OFFERS_CACHE_SECONDS)."""
    settings.LIUM_OFFERS_CACHE_SECONDS = 1
    log_path = tmp_path / "worker.log"
    process = start_worker(
        log_path=log_path, extra_env={"CAPACITY_WATCH_SCAN_SECONDS": "1", "LIUM_OFFERS_CACHE_SECONDS": "1"}
    )
    try:
        yield
    finally:
        stop_process(process)


def _until(found: Callable[[], object], what: str, seconds: float = 60) -> None:
    """Wait, bounded, for the worker to have done something the page will show."""
    deadline = time.monotonic() + seconds
    while not found():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.3)


def test_a_preset_saved_from_the_rent_form_is_used_from_the_fabric_page(
    simulator: Simulator, alice, log_in, page: Page, shot: Shot
) -> None:
    log_in("alice")
    row = page.get_by_role("row").filter(has=page.get_by_text(H100, exact=True))
    row.get_by_role("link", name="Choose nodes").click()
    page.get_by_role("link", name="the 2 cheapest").click()
    page.get_by_label("Pod name").fill("nightly")
    page.get_by_label("SSH public keys").fill(SSH_KEY)
    page.get_by_role("button", name="Save as preset…").click()
    expect(page.get_by_role("heading", name="Save a preset")).to_be_visible()
    expect(page.get_by_label("Pod name")).to_have_value("nightly")
    expect(page.get_by_label("Nodes")).to_have_value("2")
    page.get_by_label("Name", exact=True).fill("nightly h100")
    page.get_by_label("Maximum $ per node-hour").fill("20")
    shot(page, "preset-form")
    page.get_by_role("button", name="Save preset").click()
    expect(page.get_by_test_id("preset-row")).to_contain_text("nightly h100")

    page.get_by_role("link", name="Fabrics").click()
    page.get_by_test_id("preset-picker").get_by_role("link", name="nightly h100").click()
    expect(page.get_by_test_id("prefill-note")).to_contain_text("From preset 'nightly h100'")
    checked = page.locator("input[name=executor_ids]:checked")
    expect(checked).to_have_count(2)
    assert sorted(checked.evaluate_all("boxes => boxes.map(b => b.value)")) == sorted(cheapest(simulator))
    expect(page.get_by_label("Pod name")).to_have_value("nightly")
    shot(page, "rent-form-from-preset")
    page.get_by_role("button", name="Rent cluster").click()
    page.wait_for_url(RENTAL_URL)
    rental = Rental.objects.get()
    assert sorted(rental.executor_ids) == sorted(cheapest(simulator)) and rental.pod_name == "nightly"


def test_rent_again_on_a_terminated_rental(simulator: Simulator, alice, acme, log_in, page: Page, shot: Shot) -> None:
    nodes = cheapest(simulator, count=2)
    order = RentOrder(fabric_id=H100, executor_ids=nodes, pod_name="last-week", public_keys=[SSH_KEY])
    old = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    Rental.objects.filter(pk=old.pk).update(status=RentalStatus.TERMINATED)
    log_in("alice")
    page.goto(f"/rentals/{old.public_id}/")
    page.get_by_test_id("rent-again").click()
    expect(page.get_by_test_id("prefill-note")).to_contain_text("the same 2 nodes")
    expect(page.get_by_label("Pod name")).to_have_value("last-week")
    expect(page.locator("input[name=executor_ids]:checked")).to_have_count(2)
    shot(page, "rent-again")
    page.get_by_role("button", name="Rent cluster").click()
    page.wait_for_url(RENTAL_URL)
    again = Rental.objects.exclude(pk=old.pk).get()
    assert again.executor_ids == nodes and again.pod_name == "last-week"


def _taken_h100(simulator: Simulator) -> list[str]:
    everything = [n["id"] for o in simulator.offers() if o["fabric_id"] == H100 for n in o["nodes"]]
    simulator.config(taken_executors=everything)
    return everything


def test_a_watch_fires_when_the_simulator_frees_nodes(
    simulator: Simulator, watch_worker, alice, log_in, page: Page, shot: Shot
) -> None:
    everything = _taken_h100(simulator)
    log_in("alice")
    page.get_by_role("link", name="Watches").click()
    page.get_by_label("Nodes").fill("2")
    page.get_by_label("GPU type").fill("H100")
    page.get_by_label("Maximum $ per node-hour").fill("17.5")
    page.get_by_role("button", name="Start watching").click()
    expect(page.get_by_test_id("watch-row")).to_contain_text("watching")
    shot(page, "watching")

    simulator.config(taken_executors=everything[2:])  # two H100 nodes come free
    _until(lambda: CapacityWatch.objects.filter(status="fired").exists(), "the watch fired")
    page.reload()
    expect(page.get_by_test_id("watch-row")).to_contain_text("capacity found")
    shot(page, "fired")
    page.get_by_role("link", name="Open the rent form on them").click()
    checked = page.locator("input[name=executor_ids]:checked")
    expect(checked).to_have_count(2)
    assert sorted(checked.evaluate_all("boxes => boxes.map(b => b.value)")) == sorted(everything[:2])


def test_an_auto_renting_watch_rents_exactly_once(
    simulator: Simulator, watch_worker, alice, acme, log_in, page: Page, shot: Shot
) -> None:
    Preset.objects.create(
        customer=acme,
        created_by=alice,
        name="pair",
        gpu_type="H100",
        node_count=2,
        max_price_per_node_hour=Decimal("17.5"),
        pod_name="auto-pair",
        ssh_public_keys=SSH_KEY,
    )
    everything = _taken_h100(simulator)
    log_in("alice")
    page.goto("/watches/")
    page.get_by_label("Preset").select_option(label="pair")
    page.get_by_label("Rent them for me").check()
    page.get_by_role("button", name="Start watching").click()
    expect(page.get_by_test_id("watch-row")).to_contain_text("rents by itself")

    simulator.config(taken_executors=everything[2:])
    _until(lambda: CapacityWatch.objects.filter(rental__isnull=False).exists(), "the watch rented")
    _until(lambda: Rental.objects.filter(status=RentalStatus.READY).exists(), "the rental is ready")
    page.reload()
    shot(page, "rented")
    page.get_by_role("link", name="Open the rental").click()
    page.wait_for_url(RENTAL_URL)
    expect(page.get_by_text("auto-pair").first).to_be_visible()
    # Many scans have run since; one rental, one rent call in Lium's ledger.
    assert Rental.objects.count() == 1
    assert len(simulator.ledger()) == 1
