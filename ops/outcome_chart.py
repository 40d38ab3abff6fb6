"""The ops overview's rentals per hour by outcome, for the last 24 hours and 7 days: one grouped read, then
stacked bars as SVG geometry, with the figures for its table (the hours that had rentals).

Rentals are counted in the hour they were submitted, by what became of them so far (their state now).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncHour

from common.chart_scale import Scale, nice_top, tick_label, ticks
from rentals.models import Rental
from rentals.states import RentalStatus as S

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 8, 24
# What became of a rental, in the order the bars stack (bottom first): a legend's words and its states.
OUTCOMES: tuple[tuple[str, str, frozenset[str]], ...] = (
    (
        "rented",
        "Rented (ready, running or ended)",
        frozenset({S.RENTED, S.VERIFYING, S.READY, S.DEGRADED, S.CHECK_FAILED, S.TERMINATING, S.TERMINATED}),
    ),
    ("pending", "Scheduled or still being sent", frozenset({S.SCHEDULED, S.QUEUED, S.SENDING, S.RETRYING})),
    ("refused", "Refused", frozenset({S.REFUSED})),
    ("failed", "Failed or not rented", frozenset({S.FAILED, S.NOT_RENTED})),
    ("unknown", "Unknown", frozenset({S.UNKNOWN})),
    ("cancelled", "Cancelled", frozenset({S.CANCELLED})),
)
OUTCOME_OF = {status: key for key, _, statuses in OUTCOMES for status in statuses}


@dataclass(frozen=True)
class Segment:
    outcome: str
    y: float
    height: float
    count: int


@dataclass(frozen=True)
class HourBar:
    hour: datetime
    counts: dict[str, int]
    total: int
    x: float
    segments: list[Segment]

    @property
    def cells(self) -> list[int]:
        """Its rentals per outcome, in the legend's order (a table row)."""
        return [self.counts.get(key, 0) for key, _, _ in OUTCOMES]


@dataclass(frozen=True)
class OutcomeChart:
    title: str
    bars: list[HourBar]
    bar_width: float
    totals: list[tuple[str, str, int]]  # (outcome, label, rentals) for the legend
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str]]
    summary: str
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    bottom: int = HEIGHT - BOTTOM

    @property
    def paths(self) -> list[tuple[str, str]]:
        """One SVG path per outcome, a rectangle per bar: a few elements where a rect per segment made a thousand
        (a week of busy hours), whose render was most of the overview's cache miss (bench/README.md)."""
        shapes: dict[str, list[str]] = {}
        for bar in self.bars:
            for seg in bar.segments:
                shapes.setdefault(seg.outcome, []).append(
                    f"M{bar.x} {seg.y}h{self.bar_width}v{seg.height}h-{self.bar_width}Z"
                )
        return [(key, "".join(shapes[key])) for key, _, _ in OUTCOMES if key in shapes]

    @property
    def busy_hours(self) -> list[HourBar]:
        """The hours that had rentals, newest first (the table)."""
        return [bar for bar in reversed(self.bars) if bar.total]


def hourly_outcomes(*, since: datetime) -> dict[datetime, Counter[str]]:
    """Return rentals submitted since `since` per hour and outcome: one GROUP BY off `rental_created_cover`."""
    rows = (
        Rental.objects.filter(created_at__gte=since)
        .order_by()
        .annotate(hour=TruncHour("created_at"))
        .values("hour", "status")
        .annotate(n=Count("created_at"))  # not "id": the index holds no id, and reading it meant a table scan
    )
    hours: dict[datetime, Counter[str]] = {}
    for row in rows:
        hours.setdefault(row["hour"], Counter())[OUTCOME_OF.get(row["status"], "unknown")] += row["n"]
    return hours


def outcome_charts(*, now: datetime) -> list[OutcomeChart]:
    """Return the last 24 hours' and the last 7 days' charts (the current hour last, still filling)."""
    current = now.replace(minute=0, second=0, microsecond=0)
    hours = hourly_outcomes(since=current - timedelta(hours=7 * 24 - 1))
    return [
        outcome_chart(hours=hours, last=current, count=24, title="Last 24 hours"),
        outcome_chart(hours=hours, last=current, count=7 * 24, title="Last 7 days"),
    ]


def outcome_chart(*, hours: dict[datetime, Counter[str]], last: datetime, count: int, title: str) -> OutcomeChart:
    """Return `count` hourly stacked bars ending with the hour `last`."""
    slots = [last - timedelta(hours=count - 1 - index) for index in range(count)]
    top = nice_top(max((sum(hours.get(hour, Counter()).values()) for hour in slots), default=0))
    y = Scale(0, top, HEIGHT - BOTTOM, TOP)
    step = (WIDTH - RIGHT - LEFT) / count
    bars = [
        _bar(hour, hours.get(hour, Counter()), round(LEFT + index * step, 1), y) for index, hour in enumerate(slots)
    ]
    totals = [(key, label, sum(bar.counts.get(key, 0) for bar in bars)) for key, label, _ in OUTCOMES]
    every = 6 if count <= 24 else 24
    x_ticks = [
        (bar.x, f"{bar.hour:%H:%M}" if every < 24 else f"{bar.hour:%a %d}")
        for bar in bars
        if bar.hour.hour % every == 0
    ]
    said = ", ".join(f"{label.lower()} {n}" for _, label, n in totals if n) or "no rentals"
    return OutcomeChart(
        title=title,
        bars=bars,
        bar_width=round(max(step - (1 if count > 48 else 2), 0.5), 1),
        totals=totals,
        y_ticks=[(y(value), tick_label(value)) for value in ticks(top) if value == int(value)],
        x_ticks=x_ticks,
        summary=f"Rentals per hour by outcome, {title.lower()} (UTC): {said}.",
    )


def _bar(hour: datetime, counts: Counter[str], x: float, y: Scale) -> HourBar:
    segments, below = [], 0
    for key, _, _ in OUTCOMES:
        if counts.get(key):
            top_y = y(below + counts[key])
            segments.append(Segment(key, top_y, round(y(below) - top_y, 1), counts[key]))
            below += counts[key]
    return HourBar(hour=hour, counts=dict(counts), total=below, x=x, segments=segments)
