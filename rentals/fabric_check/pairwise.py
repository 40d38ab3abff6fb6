"""Naming the slow member(s) when the whole cluster's all-reduce is under the floor.

A pair's bus bandwidth is that of its slower node, so a pair at or above the floor proves both healthy. Take a
reference node (rank 0 first) and measure it with every other member: if any pair passes, the reference is
healthy and the members of the pairs under the floor are the slow ones. If none passes, the reference itself is
slow (or everyone else is): try the next rank as the reference, reusing the figures already measured. That is how
a slow rank 0 is found, by elimination. With two nodes, or when MAX_REFERENCES references find no healthy pair,
the slow node cannot be told apart: every member is named.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

MAX_REFERENCES = 3  # bounds the pairs measured to about 3 x N when nearly everything is slow

Measure = Callable[[int, int], Awaitable[float]]


async def slow_members_find(
    measure: Measure, ranks: list[int], floor: float
) -> tuple[dict[tuple[int, int], float], list[int]]:
    """Return the pair figures measured (lower rank first) and the slow ranks."""
    figures: dict[tuple[int, int], float] = {}

    async def pair(a: int, b: int) -> float:
        key = (min(a, b), max(a, b))
        if key not in figures:
            figures[key] = await measure(*key)
        return figures[key]

    for reference in ranks[:MAX_REFERENCES]:
        with_others = {other: await pair(reference, other) for other in ranks if other != reference}
        if any(gbps >= floor for gbps in with_others.values()):
            return figures, sorted(other for other, gbps in with_others.items() if gbps < floor)
    return figures, sorted(ranks)
