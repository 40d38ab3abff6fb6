"""The usage page's spend chart: the month's spend per day as a cumulative line against the monthly budget and its
80/90/100 % marks, as SVG geometry (the template only draws it) with the figures for its table.

Each usage line's cost is spread evenly over its time in the month (an open line up to now), so the line ends
exactly at the page's total; how a day splits between a line's pods is not drawn (Lium's statement has that).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from billing.usage import CENT, Month, UsageLine
from common.chart_scale import Scale, nice_top, tick_label, ticks

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 48, 12, 28
MARKS = (80, 90, 100)


@dataclass(frozen=True)
class SpendDay:
    """One day of the table: that day's spend, the month's spend at its end, and its share of the budget."""

    day: date
    spent_usd: Decimal
    total_usd: Decimal
    pct: int | None


@dataclass(frozen=True)
class BudgetMark:
    pct: int
    usd: Decimal
    y: float


@dataclass(frozen=True)
class SpendChart:
    days: list[SpendDay]
    points: str  # the polyline's "x,y x,y ..."
    end_x: float  # where the line stops (now, or the month's end)
    end_y: float
    marks: list[BudgetMark]
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str]]
    total_usd: Decimal
    budget_usd: Decimal | None
    summary: str  # the chart's words (aria-label), what a screen reader says instead of the line
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def spend_chart(*, lines: Iterable[UsageLine], month: Month, as_of: datetime, budget_usd: Decimal | None) -> SpendChart:
    """Return the cumulative spend line of these usage lines in `month` up to `as_of`, and the budget's marks."""
    days = spend_days(lines=lines, month=month, as_of=as_of, budget_usd=budget_usd)
    total = days[-1].total_usd if days else Decimal(0)
    budget = budget_usd if budget_usd is not None and budget_usd > 0 else None
    top = nice_top(float(max(total, budget or 0)))
    x = Scale(0, (month.end - month.start).total_seconds(), LEFT, WIDTH - RIGHT)
    y = Scale(0, top, HEIGHT - BOTTOM, TOP)
    end = min(month.end, max(as_of, month.start))
    coords = [(x(0), y(0))]
    for spend in days:
        at = min(datetime.combine(spend.day, datetime.min.time(), tzinfo=month.start.tzinfo) + timedelta(days=1), end)
        coords.append((x((at - month.start).total_seconds()), y(float(spend.total_usd))))
    return SpendChart(
        days=days,
        points=" ".join(f"{px},{py}" for px, py in coords),
        end_x=coords[-1][0],
        end_y=coords[-1][1],
        marks=[BudgetMark(pct, _cents(budget * pct / 100), y(float(budget) * pct / 100)) for pct in MARKS]
        if budget
        else [],
        y_ticks=[(y(value), tick_label(value)) for value in ticks(top)],
        x_ticks=_day_ticks(month, x),
        total_usd=total,
        budget_usd=budget_usd,
        summary=_summary(month, total, budget_usd, days),
    )


def spend_days(
    *, lines: Iterable[UsageLine], month: Month, as_of: datetime, budget_usd: Decimal | None
) -> list[SpendDay]:
    """Return each day of the month up to `as_of` with its spend and the month's spend at its end (cents)."""
    end = min(month.end, as_of)
    count = max(0, -(-int((end - month.start).total_seconds()) // 86400))  # days begun by `end`
    shares = [Decimal(0)] * count
    for line in lines:
        start, stop = line.started, min(line.ended or end, end)
        if stop <= start:
            continue
        length = Decimal((stop - start).total_seconds())
        for index in range((start - month.start).days, min(count, (stop - month.start).days + 1)):
            day_start = month.start + timedelta(days=index)
            overlap = min(stop, day_start + timedelta(days=1)) - max(start, day_start)
            if overlap.total_seconds() > 0:
                shares[index] += line.cost_usd * Decimal(overlap.total_seconds()) / length
    result, running, shown = [], Decimal(0), Decimal(0)
    for index, share in enumerate(shares):
        running += share
        total = _cents(running)
        pct = int(total * 100 / budget_usd) if budget_usd else None
        result.append(SpendDay(month.start.date() + timedelta(days=index), total - shown, total, pct))
        shown = total
    return result


def _cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def _day_ticks(month: Month, x: Scale) -> list[tuple[float, str]]:
    """A tick at the start of the 1st, then of every 5th day, labelled with the day of the month."""
    last = (month.end - month.start).days
    return [(x((day - 1) * 86400), str(day)) for day in (1, 5, 10, 15, 20, 25) if day <= last]


def _summary(month: Month, total: Decimal, budget: Decimal | None, days: list[SpendDay]) -> str:
    if not days:
        return f"No spend in {month.label}."
    said = f"Spend in {month.label} up to {days[-1].day:%d %b}: ${total}"
    if budget:
        return f"{said}, {days[-1].pct} % of the ${budget} monthly budget (marks at 80, 90 and 100 %)."
    return f"{said}; no monthly budget."
