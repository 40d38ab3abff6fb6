"""Whether a Lium backend promises idempotent rents (`rent_idempotency` in `GET /version`), cached.

The engine re-sends an order that may already have reached Lium only to a backend that makes this promise;
pages ask too, to offer (or not) a replay that could work.
"""

from __future__ import annotations

from django.core.cache import cache

from accounts.models import UpstreamCredential
from rentals import upstream

FEATURES_CACHE_SECONDS = 600
DISPLAY_NO_PROMISE_SECONDS = 60

NO_PROMISE_MESSAGE = (
    "this Lium backend does not promise idempotency (GET /version lists no rent_idempotency); a re-send "
    "could rent twice — reconcile instead, or ask Lium"
)


def upstream_promises_idempotency(credential: UpstreamCredential) -> bool:
    """Return whether the credential's backend lists `rent_idempotency` in `GET /version`.

    A yes is remembered for ten minutes; a no, or a failed `/version`, is asked again next time (as the
    official client does), and meanwhile counts as no.
    """
    cache_key = f"rent-idempotency:{credential.pk}"
    if cache.get(cache_key):
        return True
    try:
        promised = "rent_idempotency" in upstream.client_for(credential).version()
    except (upstream.UpstreamError, ValueError):
        return False
    if promised:
        cache.set(cache_key, True, FEATURES_CACHE_SECONDS)
    return promised


def idempotency_promise_for_display(credential: UpstreamCredential) -> bool:
    """Return `upstream_promises_idempotency` for a page: a no is remembered for a minute, so a page that
    asks while the backend says no (or is down) does not wait on `GET /version` at every view."""
    cache_key = f"rent-idempotency-shown:{credential.pk}"
    remembered = cache.get(cache_key)
    if remembered is not None:
        return bool(remembered)
    promised = upstream_promises_idempotency(credential)
    cache.set(cache_key, promised, FEATURES_CACHE_SECONDS if promised else DISPLAY_NO_PROMISE_SECONDS)
    return promised
