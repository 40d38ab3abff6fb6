"""The ops overview's charts: rentals per hour by outcome (24 h and 7 d) and time to ready p50/p90 per fabric type,
their geometry (no data, one hour, stacking, the percentile rule) and the figures the page and its tables show."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache

from ops import overview
from ops.outcome_chart import BOTTOM, HEIGHT, OUTCOMES, outcome_chart
from ops.ready_chart import UNKNOWN_TYPE, percentile, ready_chart
from rentals.states import RentalStatus

NOON = datetime(2030, 6, 3, 12, 0, tzinfo=UTC)


def test_every_state_has_one_outcome() -> None:
    grouped = [status for _, _, statuses in OUTCOMES for status in statuses]
    assert sorted(grouped) == sorted(RentalStatus.values)


def test_no_rentals_draw_empty_hours_and_say_so() -> None:
    chart = outcome_chart(hours={}, last=NOON, count=24, title="Last 24 hours")
    assert len(chart.bars) == 24 and all(bar.segments == [] for bar in chart.bars)
    assert chart.busy_hours == [] and chart.summary.endswith(": no rentals.")
    assert [label for _, label in chart.y_ticks] == ["0", "1"]


def test_one_busy_hour_stacks_its_outcomes_from_the_bottom() -> None:
    hours = {NOON - timedelta(hours=2): Counter(rented=3, refused=1, unknown=1)}
    chart = outcome_chart(hours=hours, last=NOON, count=24, title="Last 24 hours")
    [busy] = chart.busy_hours
    assert busy.hour == NOON - timedelta(hours=2) and busy.total == 5 and busy.cells == [3, 0, 1, 0, 1, 0]
    floor = HEIGHT - BOTTOM
    rented, refused, unknown = busy.segments
    assert rented.y + rented.height == floor and refused.y + refused.height == rented.y
    assert unknown.y + unknown.height == refused.y and unknown.y == 8  # five is the axis' top
    assert rented.height == pytest.approx(3 * refused.height)
    assert busy.x == chart.bars[21].x  # the 22nd of 24 hours, the current one last
    # Drawn as one path per outcome, a closed rectangle per bar.
    w = chart.bar_width
    assert chart.paths == [
        (seg.outcome, f"M{busy.x} {seg.y}h{w}v{seg.height}h-{w}Z") for seg in (rented, refused, unknown)
    ]


def test_the_week_labels_midnights_and_counts_every_hour() -> None:
    chart = outcome_chart(hours={}, last=NOON, count=168, title="Last 7 days")
    assert len(chart.bars) == 168 and chart.x_ticks[0][1] == "Tue 28"


@pytest.mark.parametrize(
    ("values", "p50", "p90", "p99"),
    [([], None, None, None), ([7.0], 7.0, 7.0, 7.0), ([*range(1, 11)], 5, 9, 10), ([*range(1, 201)], 100, 180, 198)],
)
def test_percentiles_are_nearest_rank(
    values: list[float], p50: float | None, p90: float | None, p99: float | None
) -> None:
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 99)) == (p50, p90, p99)


def ready_row(gpu: str, total: int, *, queue: int = 2, answer: int = 3) -> dict[str, object]:
    created = NOON
    return {
        "gpu_type": gpu,
        "created_at": created,
        "first_sent_at": created + timedelta(seconds=queue),
        "rented_at": created + timedelta(seconds=queue + answer),
        "ready_at": created + timedelta(seconds=total),
    }


def test_time_to_ready_is_per_fabric_type_slowest_first_with_its_parts() -> None:
    rows = [ready_row("H100", s) for s in (60, 70, 80, 90, 200)] + [ready_row("", 400, queue=10)]
    rows.append({**ready_row("A100", 50), "first_sent_at": None, "rented_at": None})  # parts unknown: total only
    chart = ready_chart(rows=rows, title="Last 7 days")
    assert [(r.fabric_type, r.rentals, r.p50, r.p90, r.p99) for r in chart.rows] == [
        (UNKNOWN_TYPE, 1, 400, 400, 400),
        ("H100", 5, 80, 200, 200),
        ("A100", 1, 50, 50, 50),
    ]
    h100 = chart.rows[1]
    assert (h100.queue_p50, h100.answer_p50, h100.start_p50) == (2, 3, 75)
    assert chart.rows[2].queue_p50 is None
    # The axis runs to 500 s (400 rounded up) over 558 units: 400 s is 446.4 of them, 200 s 223.2.
    assert (chart.rows[0].p90_width, h100.p90_width, h100.p50_width) == (446.4, 223.2, 89.3)
    assert [label for _, label in chart.x_ticks] == ["0 s", "125 s", "250 s", "375 s", "500 s"]


def test_a_fabric_types_whole_name_is_drawn_inside_the_chart() -> None:
    """GPU types are long ("NVIDIA GeForce RTX 4090"): cut to fit a label column, two types read the same
    ("NVIDIA GeForce RTX …"), and right-aligned labels ran out of the drawing on the left."""
    from django.template.loader import render_to_string

    names = ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090", "NVIDIA A100-SXM4-80GB")
    chart = ready_chart(rows=[ready_row(name, 60 + index) for index, name in enumerate(names)], title="Last 24 hours")
    svg = render_to_string("ops/_ready_chart.html", {"chart": chart}).split("</svg>")[0]
    labels = re.findall(r'<text class="bar-label"([^>]*)>([^<]*)</text>', svg)
    assert sorted(label for _, label in labels) == sorted(names)
    for attributes, label in labels:  # drawn from a left edge inside the drawing, rightwards
        assert 'text-anchor="end"' not in attributes, label
        assert float(re.findall(r' x="([-\d.]+)"', attributes)[0]) >= 0, label


def test_no_rental_ready_says_so() -> None:
    chart = ready_chart(rows=[], title="Last 24 hours")
    assert chart.rows == [] and chart.summary.endswith("no rental became ready.")


# --- The page ---------------------------------------------------------------------------------------------------


def legend(chart_html: str) -> dict[str, int]:
    return {label: int(n) for label, n in re.findall(r"</span>([^<:]+): <strong>(\d+)</strong>", chart_html)}


@pytest.mark.django_db
def test_the_overview_draws_both_charts_with_their_figures_and_tables(make_rental, sam, client_for) -> None:
    from django.utils import timezone

    now = timezone.now()
    sent = now - timedelta(hours=2)
    make_rental(
        status=RentalStatus.READY,
        gpu_type="H100",
        created_at=sent - timedelta(seconds=1),
        first_sent_at=sent,
        rented_at=sent + timedelta(seconds=2),
        ready_at=sent + timedelta(seconds=62),
    )
    make_rental(status=RentalStatus.REFUSED, created_at=now - timedelta(hours=3))
    make_rental(status=RentalStatus.UNKNOWN, created_at=now - timedelta(days=3))
    make_rental(status=RentalStatus.TERMINATED, created_at=now - timedelta(days=8))  # older than both windows
    cache.delete(overview.OVERVIEW_CACHE_KEY)
    html = client_for(sam).get("/ops/").content.decode()
    day, week = html.split('data-testid="outcome-chart"')[1:3]
    assert legend(day) == {
        "Rented (ready, running or ended)": 1,
        "Scheduled or still being sent": 0,
        "Refused": 1,
        "Failed or not rented": 0,
        "Unknown": 0,
        "Cancelled": 0,
    }
    assert legend(week)["Unknown"] == 1 and legend(week)["Rented (ready, running or ended)"] == 1
    assert 'role="img" aria-label="Rentals per hour by outcome, last 24 hours (UTC): rented' in day
    drawn = re.findall(r'<path class="o-(\w+)" d="([^"]+)"', week.split("</svg>")[0])
    assert [(outcome, shape.count("Z")) for outcome, shape in drawn] == [("rented", 1), ("refused", 1), ("unknown", 1)]
    rows = re.findall(r"<tr><td>\d{4}-\d\d-\d\d \d\d:00</td>((?:<td class=\"num\">\d+</td>)+)", day)
    assert sorted(re.findall(r">(\d+)<", row) for row in rows) == [
        ["0", "0", "1", "0", "0", "0", "1"],
        ["1", "0", "0", "0", "0", "0", "1"],
    ]
    ready = html.split('data-testid="ready-charts"', 1)[1].split("</section>", 1)[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", ready.split('data-testid="ready-table"', 1)[1].split("</table>")[0])
    assert cells == ["H100", "1", "63", "63", "63", "1.0", "2.0", "60"]
    assert "H100: p50 63 s, p90 63 s (1)" in ready and "style=" not in ready


@pytest.mark.django_db
def test_a_busy_week_reads_only_its_newest_ready_rentals_and_says_so(make_rental, monkeypatch) -> None:
    from django.utils import timezone

    from ops import ready_chart as module

    monkeypatch.setattr(module, "READY_READ_LIMIT", 2)
    now = timezone.now()
    for minutes, gpu in ((5, "H100"), (10, "H100"), (60 * 30, "A100")):
        ready = now - timedelta(minutes=minutes)
        make_rental(status=RentalStatus.READY, gpu_type=gpu, created_at=ready - timedelta(seconds=30), ready_at=ready)
    day, week = module.ready_charts(now=now)
    assert [(row.fabric_type, row.rentals) for row in week.rows] == [("H100", 2)]
    assert "last 7 days (the latest 2 ready rentals): H100" in week.summary
    assert "last 24 hours (the latest 2 ready rentals)" in day.summary


@pytest.mark.django_db
def test_the_charts_are_drawn_once_into_the_overviews_shared_cache(make_rental, sam, olga, client_for) -> None:
    cache.delete(overview.OVERVIEW_CACHE_KEY)
    make_rental(status=RentalStatus.REFUSED)
    first = client_for(sam).get("/ops/").content.decode()
    assert "Refused: <strong>1</strong>" in first
    assert 'data-testid="outcome-chart"' in cache.get(overview.OVERVIEW_CACHE_KEY)["charts"]["outcomes"]
    make_rental(status=RentalStatus.REFUSED)
    cached = client_for(olga).get("/ops/").content.decode()
    assert "Refused: <strong>1</strong>" in cached, "another staff member sees the same drawing until it expires"
    cache.delete(overview.OVERVIEW_CACHE_KEY)
    assert "Refused: <strong>2</strong>" in client_for(olga).get("/ops/").content.decode()
