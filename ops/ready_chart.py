"""The ops overview's time to ready per fabric type (GPU type), for the last 24 hours and 7 days: p50 and p90 as
paired horizontal bars (SVG geometry), with p99 and each part of the wait for the table.

Time to ready runs from the submit (`created_at`) to ready (`ready_at`); its parts are ours before the send
(submitted → sent), Lium's answer (sent → rented) and the nodes starting (rented → ready, which includes a
verified rental's check). Percentiles are nearest-rank over the rentals that became ready in the window.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from common.chart_scale import Scale, nice_top, ticks
from rentals.models import Rental

# Each fabric type's name is drawn whole on its own line above its two bars (GPU types are long, and cut to fit a
# label column beside the bars, "NVIDIA GeForce RTX 4090" and "... 3090" read the same).
WIDTH, LEFT, VALUE_WIDTH, ROW = 640, 12, 70, 58
LABEL_Y, P50_Y, P90_Y, BAR_HEIGHT = 14, 20, 36, 14  # within a row: the name's baseline, then the two bars
# At most this many of the newest ready rentals are read (off the index, in order): a busy week's percentiles are
# those of its latest rentals, and the overview's cache miss stays bounded at a million rentals.
READY_READ_LIMIT = 5000
UNKNOWN_TYPE = "GPU type not recorded"


def percentile(values: list[float], pct: int) -> float | None:
    """Nearest rank: the smallest value with at least `pct` % of them at or below it (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class ReadyRow:
    """One fabric type's figures (seconds) and its two bars' geometry."""

    fabric_type: str
    rentals: int
    p50: float
    p90: float
    p99: float  # in the table only: the bars are p50 and p90
    queue_p50: float | None  # submitted → sent
    answer_p50: float | None  # sent → rented
    start_p50: float | None  # rented → ready
    y: float
    p50_width: float
    p90_width: float

    @property
    def p50_value_x(self) -> float:
        return LEFT + self.p50_width + 6

    @property
    def p90_value_x(self) -> float:
        return LEFT + self.p90_width + 6

    @property
    def label_y(self) -> float:
        return self.y + LABEL_Y

    @property
    def p50_y(self) -> float:
        return self.y + P50_Y

    @property
    def p90_y(self) -> float:
        return self.y + P90_Y


@dataclass(frozen=True)
class ReadyChart:
    title: str
    rows: list[ReadyRow]
    x_ticks: list[tuple[float, str]]
    summary: str
    height: int
    width: int = WIDTH
    bar_x: int = LEFT
    bar_height: int = BAR_HEIGHT


def ready_times(*, since: datetime, until: datetime) -> list[dict[str, object]]:
    """Return the newest READY_READ_LIMIT rentals ready in [since, until] with their times (off `rental_ready_at`)."""
    rows = Rental.objects.filter(ready_at__gte=since, ready_at__lte=until).order_by("-ready_at")
    fields = ("gpu_type", "created_at", "first_sent_at", "rented_at", "ready_at")
    return [dict(row) for row in rows.values(*fields)[:READY_READ_LIMIT]]


def ready_charts(*, now: datetime) -> list[ReadyChart]:
    """Return the last 24 hours' and the last 7 days' charts (one read of the week)."""
    week = ready_times(since=now - timedelta(days=7), until=now)
    day = [row for row in week if row["ready_at"] >= now - timedelta(days=1)]  # type: ignore[operator]
    capped = len(week) >= READY_READ_LIMIT
    return [
        ready_chart(rows=day, title="Last 24 hours", capped=capped and len(day) == len(week)),
        ready_chart(rows=week, title="Last 7 days", capped=capped),
    ]


def _seconds(later: object, earlier: object) -> float | None:
    if not isinstance(later, datetime) or not isinstance(earlier, datetime):
        return None
    return max(0.0, (later - earlier).total_seconds())


def ready_chart(*, rows: list[dict[str, object]], title: str, capped: bool = False) -> ReadyChart:
    """Return p50/p90 bars per fabric type, the slowest p90 first (`capped`: the rows are only the newest)."""
    parts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        kind = parts[str(row["gpu_type"] or UNKNOWN_TYPE)]
        for name, later, earlier in (
            ("total", "ready_at", "created_at"),
            ("queue", "first_sent_at", "created_at"),
            ("answer", "rented_at", "first_sent_at"),
            ("start", "ready_at", "rented_at"),
        ):
            if (value := _seconds(row[later], row[earlier])) is not None:
                kind[name].append(value)
    figures = sorted(
        ((name, percentile(p["total"], 50) or 0, percentile(p["total"], 90) or 0, p) for name, p in parts.items()),
        key=lambda item: (-item[2], item[0]),
    )
    top = nice_top(max((p90 for _, _, p90, _ in figures), default=0))
    x = Scale(0, top, 0, WIDTH - LEFT - VALUE_WIDTH)
    result = [
        ReadyRow(
            fabric_type=name,
            rentals=len(p["total"]),
            p50=p50,
            p90=p90,
            p99=percentile(p["total"], 99) or 0,
            queue_p50=percentile(p["queue"], 50),
            answer_p50=percentile(p["answer"], 50),
            start_p50=percentile(p["start"], 50),
            y=index * ROW + 4,
            p50_width=x(p50),
            p90_width=x(p90),
        )
        for index, (name, p50, p90, p) in enumerate(figures)
    ]
    said = "; ".join(f"{row.fabric_type}: p50 {row.p50:.0f} s, p90 {row.p90:.0f} s ({row.rentals})" for row in result)
    return ReadyChart(
        title=title,
        rows=result,
        x_ticks=[(LEFT + x(value), f"{value:g} s") for value in ticks(top)],
        summary=f"Time to ready per fabric type, {title.lower()}"
        + (f" (the latest {len(rows)} ready rentals)" if capped else "")
        + f": {said or 'no rental became ready'}.",
        height=max(1, len(result)) * ROW + 24,
    )
