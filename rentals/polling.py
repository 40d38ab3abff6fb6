"""The progress poller: its signed token, its back-off, and the one read a poll with a valid token costs.

The rental page polls `rental_progress` with the version it shows (`v`), its current interval (`i`) and a
signed token (`t`). The token is issued only after the full session, user and permission check, and names
the rental, whether the viewer may act on it, and (as a digest) the session cookie it was issued to. For
`TOKEN_MAX_AGE_SECONDS` after that check, a poll that carries it from the same browser is answered without
the session, user or permission lookups: `live_state` reads the rental's version and status and checks that
the session still exists, in one indexed SQL query (or, with a shared cache, one cache round trip). Unchanged:
the answer is only a new, slower poller. Changed: the progress section too, rendered once per version
(`rentals.progress`). Anything else (expired or foreign token, logged-out session) takes the full, checked
path, which issues a new token; so a revoked membership or role stops showing progress within the token's life.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl

from django.conf import settings
from django.contrib.sessions.backends.cached_db import KEY_PREFIX as CACHED_DB_SESSION_PREFIX
from django.contrib.sessions.models import Session
from django.core import signing
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpRequest
from django.utils.html import escape
from django.utils.safestring import SafeString

from rentals.models import Rental
from rentals.states import FINAL_STATES, IN_FLIGHT_STATES

POLL_FAST_SECONDS = 2.0
POLL_SLOW_SECONDS = 15.0
POLL_MAX_SECONDS = 30.0
TOKEN_SALT = "rentals.poll"  # noqa: S105 - a namespace for signatures, not a secret
# How long a token stands in for the full check: the most a revoked membership or role can still see.
TOKEN_MAX_AGE_SECONDS = 300
POLL_STATE_CACHE_SECONDS = 10

DB_SESSIONS = "django.contrib.sessions.backends.db"
CACHED_DB_SESSIONS = "django.contrib.sessions.backends.cached_db"


@dataclass(frozen=True)
class PollGrant:
    """What a valid token proves: this browser's session passed the full check for this rental lately."""

    rental_id: int
    may_act: bool
    session_key: str
    token: str


@dataclass(frozen=True)
class PollState:
    """The rental's version and status, as the not-modified shortcut needs them."""

    version: int
    status: str
    public_hex: str


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


def poll_token(*, request: HttpRequest, rental_id: int, may_act: bool) -> str:
    """Sign what this browser session may poll (issued only after the full permission check)."""
    payload = [rental_id, _session_tag(request.session.session_key), int(may_act)]
    return signing.dumps(payload, salt=TOKEN_SALT, compress=False)


@dataclass(frozen=True)
class PollQuery:
    """What a poll asks: the version its page shows, its current interval, and its token (0, 0, "" if absent)."""

    version: int
    interval: float
    token: str


def read_poll_query(request: HttpRequest) -> PollQuery:
    """Parse the poll's three parameters from the raw query string (cheaper than building `request.GET`)."""
    try:
        params = dict(parse_qsl(request.META.get("QUERY_STRING", ""), max_num_fields=10))
    except ValueError:
        params = {}
    try:
        version, interval = int(params.get("v", "0")), float(params.get("i", "0"))
    except ValueError:
        version, interval = 0, 0.0
    # min() first: a NaN interval compares false both ways and becomes 0.
    return PollQuery(version=version, interval=max(0.0, min(interval, POLL_MAX_SECONDS)), token=params.get("t", ""))


@functools.lru_cache(maxsize=4096)
def _verified(token: str, secret_key: str) -> tuple[int, str, bool, int]:
    """Check a token's signature once per process; return (rental id, session tag, may act, issued at).

    Raises BadSignature, ValueError or TypeError for a forged or malformed token (not cached). `secret_key`
    is part of the cache key so that a changed key never accepts a token signed with the old one.
    """
    rental_id, session_tag, may_act = signing.loads(token, key=secret_key, salt=TOKEN_SALT)
    issued_at = signing.b62_decode(token.rsplit(":", 2)[-2])  # the signed timestamp TimestampSigner added
    return int(rental_id), str(session_tag), bool(may_act), issued_at


def read_grant(request: HttpRequest, query: PollQuery) -> PollGrant | None:
    """Return what the poll's token grants, or None when it is absent, forged, expired or another browser's."""
    if not query.token:
        return None
    try:
        rental_id, session_tag, may_act, issued_at = _verified(query.token, settings.SECRET_KEY)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if time.time() - issued_at > TOKEN_MAX_AGE_SECONDS:
        return None
    cookie = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not cookie or not hmac.compare_digest(session_tag, _session_tag(cookie)):
        return None
    return PollGrant(rental_id=rental_id, may_act=may_act, session_key=cookie, token=query.token)


def _session_cache_key(session_key: str) -> str | None:
    """The cache key `cached_db` keeps this session under, when sessions live in the shared cache."""
    if settings.SESSION_ENGINE == CACHED_DB_SESSIONS and settings.SESSION_CACHE_ALIAS == "default":
        return CACHED_DB_SESSION_PREFIX + session_key
    return None


def live_state(grant: PollGrant) -> PollState | None:
    """Return the granted rental's version and status if the session the token was issued to still exists.

    None: the rental is gone, the session ended (logout, expiry), or sessions are kept where this cannot look.
    """
    if settings.SESSION_ENGINE not in (DB_SESSIONS, CACHED_DB_SESSIONS):
        return None
    if settings.POLL_STATE_CACHE:
        state_key, session_key = _state_key(grant.rental_id), _session_cache_key(grant.session_key)
        found = cache.get_many([state_key, session_key] if session_key else [state_key])
        if state_key in found and (session_key is None or session_key in found):
            return PollState(*found[state_key])
    rental_table, session_table = Rental._meta.db_table, Session._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.version, r.status, r.public_id FROM {rental_table} r WHERE r.id = %s AND EXISTS "  # noqa: S608
            f"(SELECT 1 FROM {session_table} s WHERE s.session_key = %s AND s.expire_date > %s)",
            [grant.rental_id, grant.session_key, datetime.now(UTC)],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    state = (row[0], row[1], str(row[2]).replace("-", ""))
    if settings.POLL_STATE_CACHE:
        # A short life bounds the damage of a read that raced a write (at worst one stale poll interval).
        cache.set(_state_key(grant.rental_id), state, POLL_STATE_CACHE_SECONDS)
    return PollState(*state)


def next_interval(*, status: str, version: int, seen_version: int, interval: float) -> float:
    """Poll fast while in flight, slowly otherwise, and back off by 1.5 times (up to 30 s) while unchanged."""
    base = POLL_FAST_SECONDS if status in IN_FLIGHT_STATES else POLL_SLOW_SECONDS
    if seen_version == version and interval:
        return min(max(interval * 1.5, base), POLL_MAX_SECONDS)
    return base


def poller_html(*, url: str, version: int, status: str, interval: float, token: str) -> SafeString:
    """Return the poller element: it asks `url` again after `interval` seconds, or never once the rental is final."""
    if status in FINAL_STATES:
        return SafeString('<div id="poller"></div>')
    # An f-string, not format_html: this runs on every poll; only the URL and token are text (both escaped).
    query = f"v={int(version)}&amp;i={float(interval)}&amp;t={escape(token)}"
    trigger = f"load delay:{float(interval)}s"
    attributes = f'hx-get="{escape(url)}?{query}" hx-trigger="{trigger}" hx-swap="outerHTML"'
    return SafeString(f'<div id="poller" {attributes}></div>')
