"""The one backoff rule for every retry (rent re-sends, DELETEs, reconcile looks, webhook deliveries)."""

from __future__ import annotations

import random


def backoff_seconds(*, failures: int, base: float, cap: float) -> float:
    """Return the wait after `failures` failed tries: `base` doubling per failure up to `cap`, with jitter over
    its upper half, so that the retries of many things that failed together spread out."""
    ceiling = min(cap, base * 2 ** max(failures - 1, 0))
    return ceiling * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret
