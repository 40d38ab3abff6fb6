"""The usage page's spend per cluster: one horizontal bar per rental's cluster, the costliest first (the rest summed
in one bar), as SVG geometry with the figures for its table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from billing.usage import UsageLine
from common.chart_scale import Scale, nice_top

WIDTH, LABEL_WIDTH, VALUE_WIDTH, ROW = 640, 170, 90, 24
BAR_LIMIT = 10


@dataclass(frozen=True)
class ClusterBar:
    label: str
    cost_usd: Decimal
    running: bool  # its cost still grows
    y: float
    width: float

    @property
    def value_x(self) -> float:
        return LABEL_WIDTH + self.width + 6


@dataclass(frozen=True)
class ClusterChart:
    bars: list[ClusterBar]
    total_usd: Decimal
    summary: str
    height: int
    width: int = WIDTH
    bar_x: int = LABEL_WIDTH


def cluster_chart(*, lines: Iterable[UsageLine], limit: int = BAR_LIMIT) -> ClusterChart:
    """Return one bar per cluster with a cost, the `limit` costliest first; the others share one last bar."""
    costly = sorted((line for line in lines if line.cost_usd > 0), key=lambda line: (-line.cost_usd, line.pod_name))
    rows = [(line.pod_name, line.cost_usd, line.ended is None) for line in costly[:limit]]
    rest = costly[limit:]
    if rest:
        others = sum((line.cost_usd for line in rest), Decimal(0))
        rows.append((f"{len(rest)} other cluster{'s' if len(rest) > 1 else ''}", others, False))
    top = nice_top(float(max((cost for _, cost, _ in rows), default=0)))
    x = Scale(0, top, 0, WIDTH - LABEL_WIDTH - VALUE_WIDTH)
    bars = [
        ClusterBar(label=label, cost_usd=cost, running=running, y=index * ROW + 4, width=x(float(cost)))
        for index, (label, cost, running) in enumerate(rows)
    ]
    total = sum((line.cost_usd for line in costly), Decimal(0))
    if bars:
        summary = f"Spend per cluster: {len(costly)} cluster{'s' if len(costly) != 1 else ''}, ${total} in all; "
        summary += "; ".join(f"{bar.label} ${bar.cost_usd}" for bar in bars) + "."
    else:
        summary = "No cluster has cost anything this month."
    return ClusterChart(bars=bars, total_usd=total, summary=summary, height=max(1, len(bars)) * ROW + 8)
