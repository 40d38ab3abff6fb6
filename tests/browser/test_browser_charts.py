"""The charts in a real browser at 1280 px: the usage page's spend line against the budget and its spend per
cluster, the ops overview's rentals per hour by outcome and time to ready per fabric type. Each chart is an image
with words (role img, a label) and a table equivalent that opens; the CSP lets every chart draw (no console
error). Screenshots land in test-artifacts/screenshots/ (see conftest)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone

from billing.services import budget_set_by_operator
from billing.usage import Month
from rentals.states import RentalStatus

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]


@pytest.fixture
def month_of_rentals(make_rental, acme, globex):  # type: ignore[no-untyped-def]
    """Acme's clusters this month at a few prices and times, a $5000 budget, and Globex's week of rentals in every
    outcome, some ready on two GPU types."""
    now = timezone.now()
    start = Month.of(now).start
    for index, (price, hours_in) in enumerate((("20.00", 0), ("12.50", 3), ("8.10", 10), ("6.00", 30))):
        rented = min(start + timedelta(hours=hours_in), now - timedelta(minutes=30))
        make_rental(
            pod_name=f"train-{index}",
            status=RentalStatus.READY,
            cluster_id=f"cl-{index}",
            price_per_hour=Decimal(price),
            rented_at=rented,
        )
    outcomes = [RentalStatus.READY] * 5 + [RentalStatus.REFUSED, RentalStatus.FAILED, RentalStatus.UNKNOWN]
    for hour in range(0, 7 * 24, 5):
        status = outcomes[hour % len(outcomes)]
        created = now - timedelta(hours=hour, minutes=7)
        fields = {"status": status, "created_at": created}
        if status == RentalStatus.READY:
            wait = 40 + (hour % 9) * 15
            fields.update(
                gpu_type="H100" if hour % 2 else "A100",
                first_sent_at=created + timedelta(seconds=1),
                rented_at=created + timedelta(seconds=3),
                ready_at=created + timedelta(seconds=wait),
            )
        make_rental(customer=globex, pod_name=f"hist-{hour}", **fields)
    budget_set_by_operator(customer=acme, monthly_budget_usd=Decimal(5000), enforce=False, grace_hours=24)


def test_the_usage_page_shows_spend_against_the_budget_and_per_cluster(  # type: ignore[no-untyped-def]
    page: Page, log_in, month_of_rentals, shot: Shot
) -> None:
    log_in("alice")
    page.goto("/usage/")
    spend = page.get_by_test_id("spend-svg")
    expect(spend).to_be_visible()
    expect(spend).to_have_attribute("role", "img")
    assert "of the $5000.00 monthly budget" in (spend.get_attribute("aria-label") or "")
    expect(page.locator(".budget-mark")).to_have_count(3)
    expect(page.get_by_test_id("cluster-svg")).to_be_visible()
    page.get_by_text("Spend per day (table)").click()
    expect(page.get_by_test_id("spend-table").locator("tbody tr").first).to_be_visible()
    shot(page, "usage-charts")


def test_the_ops_overview_shows_outcomes_per_hour_and_time_to_ready(  # type: ignore[no-untyped-def]
    page: Page, log_in, month_of_rentals, shot: Shot, sam
) -> None:
    log_in("sam")
    page.goto("/ops/")
    expect(page.get_by_test_id("outcome-chart")).to_have_count(2)
    expect(page.get_by_test_id("ready-chart").first.locator("svg")).to_be_visible()
    assert "H100: p50" in (page.get_by_test_id("ready-chart").nth(1).locator("svg").get_attribute("aria-label") or "")
    page.get_by_test_id("ready-chart").nth(1).get_by_text("Time to ready per fabric type (table)").click()
    expect(page.get_by_test_id("ready-table").nth(1)).to_contain_text("H100")
    for chart in page.get_by_test_id("outcome-chart").all():  # drawn from the figure's left edge, as its legend
        offset = chart.evaluate(
            "figure => figure.querySelector('svg').getBoundingClientRect().left - figure.getBoundingClientRect().left"
        )
        assert abs(offset) <= 1, f"the chart starts {offset:.0f} px right of its figure"
    shot(page, "ops-overview-charts")


NARROW = 375
MIN_TEXT_PX = 9  # the smallest chart text a phone shows, in CSS pixels
SMALLEST_TEXT = """() => Math.min(...[...document.querySelectorAll("figure.chart svg[viewBox]")].flatMap(svg => {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    return [...svg.querySelectorAll("text")].map(text => parseFloat(getComputedStyle(text).fontSize) * scale);
}))"""


@pytest.mark.parametrize(("persona", "url"), [("alice", "/usage/"), ("sam", "/ops/")])
def test_the_charts_are_readable_375_px_wide(  # type: ignore[no-untyped-def]
    page: Page, log_in, month_of_rentals, shot: Shot, sam, persona: str, url: str
) -> None:
    """Shrunk into a phone's width, a 640-unit drawing's 11 px ticks were 5 px tall. A chart keeps a width its
    words can be read at and scrolls sideways in its own box (which a keyboard can reach); the page never does."""
    page.set_viewport_size({"width": NARROW, "height": 900})
    log_in(persona)
    page.goto(url)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        shot(page, f"charts-{scheme}-{NARROW}")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= NARROW
    smallest = page.evaluate(SMALLEST_TEXT)
    assert smallest >= MIN_TEXT_PX, f"the smallest chart text is {smallest:.1f} px at {NARROW} px"
    boxes = page.locator("figure.chart .chart-box")
    assert boxes.count() == page.locator("figure.chart svg[viewBox]").count() > 0
    for index in range(boxes.count()):
        box = boxes.nth(index)
        assert box.evaluate("box => box.scrollWidth > box.clientWidth")  # it scrolls at this width
        assert box.get_attribute("tabindex") == "0"
    # Rentals per hour end with the hour now: the box opens on the newest hours, not a week ago.
    for chart in page.get_by_test_id("outcome-chart").all():
        shown = chart.locator(".chart-box").evaluate(
            "box => box.getBoundingClientRect().right - box.querySelector('svg').getBoundingClientRect().right"
        )
        assert shown >= -1, f"the newest hour is {-shown:.0f} px out of view"


def test_a_chart_table_opened_on_the_ops_overview_stays_open_through_its_refresh(  # type: ignore[no-untyped-def]
    page: Page, log_in, month_of_rentals, sam
) -> None:
    """The overview's figures are swapped in anew every 15 s: the table a person opened (from the keyboard) snapped
    shut and the focus fell to the page's start."""
    log_in("sam")
    page.goto("/ops/")
    table = page.get_by_test_id("ready-chart").nth(1).locator("details")
    table.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(table).to_have_attribute("open", "")
    page.evaluate("document.getElementById('ops-panel').dataset.old = 'yes'")
    expect(page.locator("#ops-panel:not([data-old])")).to_have_count(1, timeout=25_000)  # the refresh came
    expect(table).to_have_attribute("open", "")
    expect(table.locator("summary")).to_be_focused()
