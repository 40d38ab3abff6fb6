"""Fixed-window rate limits kept in the cache (shared between processes when CACHE_URL is Redis)."""

from __future__ import annotations

import contextlib
import time

from django.core.cache import cache


def hit(*, scope: str, key: str, limit: int, window_seconds: int = 60) -> int | None:
    """Count one event; return None when within `limit`, else the seconds until the window resets."""
    return _count(scope, key, limit, window_seconds)[1]


def take_all(limits: list[tuple[str, str, int]], window_seconds: int = 60) -> int | None:
    """Count one event against every (scope, key, limit) only if all allow it; else count it against none.

    Return None when taken, else the seconds to wait. A refused try gives back what it counted, so refusals
    never use up a budget that others share.
    """
    counted: list[str] = []
    for scope, key, limit in limits:
        cache_key, wait = _count(scope, key, limit, window_seconds)
        counted.append(cache_key)
        if wait is not None:
            for taken in counted:
                with contextlib.suppress(ValueError):  # the window ended meanwhile: nothing to give back
                    cache.decr(taken)
            return wait
    return None


def _count(scope: str, key: str, limit: int, window_seconds: int) -> tuple[str, int | None]:
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
        return cache_key, (window + 1) * window_seconds - now
    return cache_key, None
