"""The usage page's charts: the month's spend as a cumulative line against the budget's 80/90/100 % marks and the
spend per cluster, their geometry (scales, no data, one point, a budget of zero or none) and the page's figures."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.cluster_chart import BAR_LIMIT, cluster_chart
from billing.services import budget_set_by_operator
from billing.spend_chart import BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH, spend_chart, spend_days
from billing.usage import Month, UsageLine
from common.chart_scale import Scale, nice_top, tick_label, ticks

JUNE = Month(2030, 6)
JUNE_1 = datetime(2030, 6, 1, tzinfo=UTC)


def line(cost: str, start: datetime, end: datetime | None, name: str = "job", customer_id: int = 1) -> UsageLine:
    return UsageLine(
        rental_id=name,
        pod_name=name,
        customer_id=customer_id,
        customer_name="Acme",
        customer_ref="acme",
        status="ready",
        started=start,
        ended=end,
        hours=Decimal(1),
        price_per_hour=Decimal(1),
        cost_usd=Decimal(cost),
        estimate=end is None,
    )


@pytest.mark.parametrize(
    ("value", "top"), [(0, 1), (-3, 1), (float("nan"), 1), (1, 1), (7, 10), (12, 20), (2.3, 2.5), (4200, 5000)]
)
def test_the_axis_top_is_the_next_round_value(value: float, top: float) -> None:
    assert nice_top(value) == top


def test_a_scale_maps_its_ends_and_draws_a_y_axis_upwards() -> None:
    y = Scale(0, 100, 200, 10)
    assert (y(0), y(100), y(50)) == (200, 10, 105)
    assert Scale(5, 5, 0, 100)(5) == 0  # an empty domain draws at the start instead of dividing by zero
    assert ticks(100) == [0, 25, 50, 75, 100] and [tick_label(v) for v in (0, 2.5, 750, 1250, 5000)] == [
        "0",
        "2.5",
        "750",
        "1.25k",
        "5k",
    ]


def test_cost_is_spread_over_each_day_and_the_line_ends_at_the_total() -> None:
    lines = [
        line("48.00", JUNE_1, JUNE_1 + timedelta(days=2)),  # 24 a day on the 1st and 2nd
        line("10.01", JUNE_1 + timedelta(days=1, hours=12), None),  # runs on: half a day on the 2nd so far
    ]
    days = spend_days(lines=lines, month=JUNE, as_of=JUNE_1 + timedelta(days=2), budget_usd=Decimal(100))
    assert [(d.day.day, d.spent_usd, d.total_usd, d.pct) for d in days] == [
        (1, Decimal("24.00"), Decimal("24.00"), 24),
        (2, Decimal("34.01"), Decimal("58.01"), 58),
    ]


def test_no_usage_draws_a_flat_line_and_says_so() -> None:
    chart = spend_chart(lines=[], month=JUNE, as_of=JUNE_1 + timedelta(days=3), budget_usd=None)
    assert [d.total_usd for d in chart.days] == [0, 0, 0] and chart.total_usd == 0
    assert {point.split(",")[1] for point in chart.points.split()} == {str(float(HEIGHT - BOTTOM))}
    assert chart.marks == [] and "no monthly budget" in chart.summary


def test_a_month_not_begun_has_no_days_and_no_point_but_the_origin() -> None:
    chart = spend_chart(lines=[], month=Month(2030, 7), as_of=JUNE_1, budget_usd=Decimal(50))
    assert chart.days == [] and chart.points == f"{float(LEFT)},{float(HEIGHT - BOTTOM)}"
    assert chart.summary == "No spend in 2030-07."


def test_one_hour_into_the_month_is_one_point_after_the_origin() -> None:
    as_of = JUNE_1 + timedelta(hours=1)
    chart = spend_chart(lines=[line("5.00", JUNE_1, None)], month=JUNE, as_of=as_of, budget_usd=Decimal(10))
    origin, point = chart.points.split()
    hour_x = round(LEFT + (WIDTH - RIGHT - LEFT) / (30 * 24), 1)
    half_y = (HEIGHT - BOTTOM + TOP) / 2  # $5 on an axis to the $10 budget
    assert origin == f"{float(LEFT)},{float(HEIGHT - BOTTOM)}" and point == f"{hour_x},{half_y}"
    assert chart.days[0].pct == 50 and (chart.end_x, chart.end_y) == (hour_x, half_y)


def test_the_budget_marks_sit_at_80_90_and_100_percent_and_the_axis_holds_the_budget() -> None:
    lines = [line("30.00", JUNE_1, JUNE_1 + timedelta(days=1))]
    chart = spend_chart(lines=lines, month=JUNE, as_of=JUNE_1 + timedelta(days=10), budget_usd=Decimal(200))
    y = Scale(0, 200, HEIGHT - BOTTOM, TOP)
    assert [(m.pct, m.usd, m.y) for m in chart.marks] == [
        (80, Decimal("160.00"), y(160)),
        (90, Decimal("180.00"), y(180)),
        (100, Decimal("200.00"), float(TOP)),
    ]
    assert chart.y_ticks[-1] == (TOP, "200") and chart.days[-1].pct == 15


@pytest.mark.parametrize("budget", [None, Decimal(0)])
def test_no_budget_or_a_budget_of_zero_draws_no_marks(budget: Decimal | None) -> None:
    chart = spend_chart(
        lines=[line("5.00", JUNE_1, JUNE_1 + timedelta(hours=5))],
        month=JUNE,
        as_of=JUNE_1 + timedelta(days=1),
        budget_usd=budget,
    )
    assert chart.marks == [] and chart.days[-1].pct is None and chart.y_ticks[-1] == (TOP, "5")


def test_cluster_bars_are_costliest_first_and_the_rest_share_one_bar() -> None:
    lines = [line(f"{n}.00", JUNE_1, JUNE_1 + timedelta(hours=1), name=f"c{n:02d}") for n in range(1, 13)]
    lines.append(line("0.00", JUNE_1, JUNE_1 + timedelta(hours=1), name="free"))
    chart = cluster_chart(lines=lines)
    assert [bar.label for bar in chart.bars] == [f"c{n:02d}" for n in range(12, 2, -1)] + ["2 other clusters"]
    assert len(chart.bars) == BAR_LIMIT + 1 and chart.bars[-1].cost_usd == Decimal(3)
    assert chart.total_usd == Decimal(78)
    top_width = chart.bars[0].width  # 12 of an axis to 20
    assert chart.bars[1].width == round(top_width * 11 / 12, 1)


def test_no_cluster_cost_draws_no_bar() -> None:
    chart = cluster_chart(lines=[])
    assert chart.bars == [] and chart.summary == "No cluster has cost anything this month."


# --- The page ---------------------------------------------------------------------------------------------------


def test_the_usage_page_draws_the_spend_line_with_the_budget_marks_and_tables(
    client_for, alice, acme, globex, make_ready_rental, june_clock
) -> None:
    budget_set_by_operator(customer=acme, monthly_budget_usd=Decimal(100), enforce=False, grace_hours=24)
    make_ready_rental(acme, price="2.00", pod_name="acme-train")
    make_ready_rental(globex, price="9.00", pod_name="globex-job")  # not Acme's: in neither chart
    june_clock.advance(days=1, hours=12)
    html = client_for(alice).get("/usage/?month=2030-06").content.decode()
    spend = html.split('data-testid="spend-chart"', 1)[1].split("</figure>", 1)[0]
    assert re.findall(r'class="budget-mark m(\d+)"', spend) == ["80", "90", "100"]
    assert 'role="img" aria-label="Spend in 2030-06 up to 02 Jun: $72.00, 72 % of the $100.00 monthly budget' in spend
    rows = re.findall(
        r"<tr><td>(2030-06-\d\d)</td><td class=\"num\">([\d.]+)</td><td class=\"num\">([\d.]+)</td>", spend
    )
    assert rows == [("2030-06-01", "48.00", "48.00"), ("2030-06-02", "24.00", "72.00")]
    clusters = html.split('data-testid="cluster-chart"', 1)[1].split("</figure>", 1)[0]
    assert "acme-train" in clusters and "globex" not in clusters and "$72.00 so far" in clusters
    assert "style=" not in spend + clusters  # the CSP forbids inline styles: colours are classes


def test_staff_see_one_spend_line_of_every_customer_without_budget(
    client_for, sam, acme, globex, make_ready_rental, june_clock
) -> None:
    make_ready_rental(acme, price="1.00")
    make_ready_rental(globex, price="3.00")
    june_clock.advance(hours=10)
    html = client_for(sam).get("/usage/?month=2030-06").content.decode()
    spend = html.split('data-testid="spend-all"', 1)[1].split("</section>", 1)[0]
    assert "$40.00; no monthly budget" in spend and "budget-mark" not in spend
