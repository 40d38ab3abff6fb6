"""The one axis rule of the server-rendered SVG charts: a round top value, evenly spaced ticks, and a linear map
from values to drawing units. Charts draw in a fixed viewBox and scale with the page (no script, strict CSP)."""

from __future__ import annotations

import math
from dataclasses import dataclass


def nice_top(value: float) -> float:
    """Return the smallest 1, 2, 2.5 or 5 x 10^k at or above `value` (1 for nothing to show: an empty axis)."""
    if not value or value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power * (1 + 1e-9):
            return step * power
    return 10 * power  # pragma: no cover - the loop ends at 10


@dataclass(frozen=True)
class Scale:
    """A linear map from [low, high] onto [start, end] in drawing units (end < start for a y axis drawn upwards)."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.high - self.low
        share = (value - self.low) / span if span else 0.0
        return round(self.start + share * (self.end - self.start), 1)


def ticks(top: float, count: int = 4) -> list[float]:
    """Return `count` + 1 evenly spaced values from 0 to `top` (a round top keeps them round)."""
    return [top * index / count for index in range(count + 1)]


def tick_label(value: float) -> str:
    """A tick's words: thousands as k, with at most two decimals (0, 2.5, 750, 1.25k, 5k)."""
    if value >= 1000:
        return _short(value / 1000) + "k"
    return _short(value)


def _short(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")
