"""Fixed-window rate limits kept in the cache (shared between processes when CACHE_URL is Redis)."""

from __future__ import annotations

import time

from django.core.cache import cache


def hit(*, scope: str, key: str, limit: int, window_seconds: int = 60) -> int | None:
    """Count one event; return None when within `limit`, else the seconds until the window resets."""
    now = int(time.time())
    window = now // window_seconds
    cache_key = f"ratelimit:{scope}:{key}:{window}"
    # add() is atomic: only the first event of a window creates the counter.
    if cache.add(cache_key, 1, timeout=window_seconds + 1):
        count = 1
    else:
        try:
            count = cache.incr(cache_key)
        except ValueError:  # expired between add() and incr()
            cache.add(cache_key, 1, timeout=window_seconds + 1)
            count = 1
    if count > limit:
        return (window + 1) * window_seconds - now
    return None
