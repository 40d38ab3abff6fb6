"""The progress poller and its not-modified shortcut.

The rental page polls `rental_progress` with the version it shows (`v`), its current interval (`i`) and a
signed token (`t`) naming the rental it was authorised for and the session cookie it was issued to. While
the rental is unchanged, the answer is only a new poller (a slower one): `unchanged_poller` gives it with
one primary-key SQL read (or, with a shared cache, one cache read) and no ORM, template, session, user or
permission lookup, so that many open pages cost the server little. The token proves the full permission
check passed for this browser's session; the answer reveals nothing but "still the version you have".
Anything else (changed, expired token, another session) falls through to the full, checked path, which
issues a new token.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from rentals.models import Rental
from rentals.states import FINAL_STATES, IN_FLIGHT_STATES

POLL_FAST_SECONDS = 2.0
POLL_SLOW_SECONDS = 15.0
POLL_MAX_SECONDS = 30.0
TOKEN_SALT = "rentals.poll"  # noqa: S105 - a namespace for signatures, not a secret
TOKEN_MAX_AGE_SECONDS = 6 * 3600
POLL_STATE_CACHE_SECONDS = 10


def _session_tag(session_key: str | None) -> str:
    # A digest, so the token never carries the session key itself.
    return hashlib.sha256((session_key or "").encode()).hexdigest()[:24]


def _state_key(rental_id: int) -> str:
    return f"rental-poll-state:{rental_id}"


def forget_poll_state(rental_id: int) -> None:
    """Drop the cached poll state once the change that bumped the rental's version is committed.

    Every write that bumps `Rental.version` calls this (transitions, touches, claims, staff actions).
    """
    if settings.POLL_STATE_CACHE:
        transaction.on_commit(lambda: cache.delete(_state_key(rental_id)))


def _poll_state_row(rental_id: int) -> tuple[int, str, str] | None:
    """Return (version, status, public id): from the shared cache when enabled, else one primary-key read."""
    if settings.POLL_STATE_CACHE:
        cached = cache.get(_state_key(rental_id))
        if cached is not None:
            return cached
    table = Rental._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version, status, public_id FROM {table} WHERE id = %s", [rental_id])  # noqa: S608
        row = cursor.fetchone()
    if row is None:
        return None
    state = (row[0], row[1], str(row[2]).replace("-", ""))
    if settings.POLL_STATE_CACHE:
        # A short life bounds the damage of a read that raced a write (at worst one stale poll interval).
        cache.set(_state_key(rental_id), state, POLL_STATE_CACHE_SECONDS)
    return state


def poll_token(*, request: HttpRequest, rental_id: int) -> str:
    """Sign which rental this browser session may poll (issued after the full permission check)."""
    return signing.dumps([rental_id, _session_tag(request.session.session_key)], salt=TOKEN_SALT, compress=False)


def next_interval(*, status: str, version: int, seen_version: int, interval: float) -> float:
    """Poll fast while in flight, slowly otherwise, and back off by 1.5 times (up to 30 s) while unchanged."""
    base = POLL_FAST_SECONDS if status in IN_FLIGHT_STATES else POLL_SLOW_SECONDS
    if seen_version == version and interval:
        return min(max(interval * 1.5, base), POLL_MAX_SECONDS)
    return base


def poller_html(*, public_id: object, version: int, status: str, interval: float, token: str) -> SafeString:
    """Return the poller element: it asks again after `interval` seconds, or never once the rental is final."""
    if status in FINAL_STATES:
        return format_html('<div id="poller"></div>')
    url = reverse("rental_progress", kwargs={"public_id": public_id})
    return format_html(
        '<div id="poller" hx-get="{}?v={}&amp;i={}&amp;t={}" hx-trigger="load delay:{}s" hx-swap="outerHTML"></div>',
        url,
        version,
        interval,
        token,
        interval,
    )


def read_poll_state(request: HttpRequest) -> tuple[int, float]:
    """Return the version the page shows and its current poll interval (0, 0 when absent or garbled)."""
    try:
        return int(request.GET.get("v", "0")), max(0.0, min(float(request.GET.get("i", "0")), POLL_MAX_SECONDS))
    except ValueError:
        return 0, 0.0


def unchanged_poller(request: HttpRequest, public_id: object) -> HttpResponse | None:
    """Answer an unchanged rental's poll cheaply, or return None to take the full path."""
    seen_version, interval = read_poll_state(request)
    token = request.GET.get("t", "")
    if not (token and interval):
        return None
    try:
        rental_id, session_tag = signing.loads(token, salt=TOKEN_SALT, max_age=TOKEN_MAX_AGE_SECONDS)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    cookie = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not cookie or not hmac.compare_digest(str(session_tag), _session_tag(cookie)):
        return None
    row = _poll_state_row(rental_id)
    # The public id in the URL must match the rental the token names.
    if row is None or row[0] != seen_version or row[2] != str(public_id).replace("-", ""):
        return None
    version, status = row[0], row[1]
    delay = next_interval(status=status, version=version, seen_version=seen_version, interval=interval)
    html = poller_html(public_id=public_id, version=version, status=status, interval=delay, token=token)
    return HttpResponse(html)
