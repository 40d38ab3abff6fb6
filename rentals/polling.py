"""What a poll may read without the full check: its signed token, and the one read that token buys.

The token is issued after the full session, user and permission check. It names the rental, whether the viewer
may act on it, and a digest of the browser's session cookie. For 5 minutes a poll that carries it from that
browser costs one read (the rental's version and status, and that the session still exists) instead of the
session, user and permission lookups; after that the full check applies again, so a removed member or a changed
role stops seeing progress within 5 minutes. `rentals.progress` answers the poll.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.sessions.backends.cached_db import KEY_PREFIX as CACHED_DB_SESSION_PREFIX
from django.contrib.sessions.models import Session
from django.core import signing
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpRequest

from rentals.models import Rental

TOKEN_SALT = "rentals.poll"  # noqa: S105 - a namespace for signatures, not a secret
# How long a token stands in for the full check: the most a revoked membership or role can still see.
TOKEN_MAX_AGE_SECONDS = 300
# A short life bounds the damage of a state read that raced a write: at worst one stale poll interval.
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
    """The rental's version and status: all a poll needs to know whether anything changed."""

    version: int
    status: str
    public_hex: str


def poll_token(*, request: HttpRequest, rental_id: int, may_act: bool) -> str:
    """Sign what this browser session may poll (call only after the full permission check)."""
    payload = [rental_id, _session_tag(request.session.session_key), int(may_act)]
    return signing.dumps(payload, salt=TOKEN_SALT, compress=False)


def read_grant(request: HttpRequest, token: str) -> PollGrant | None:
    """Return what `token` grants, or None when it is absent, forged, expired or another browser's."""
    if not token:
        return None
    try:
        rental_id, session_tag, may_act, issued_at = _verified(token, settings.SECRET_KEY)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if time.time() - issued_at > TOKEN_MAX_AGE_SECONDS:
        return None
    cookie = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not cookie or not hmac.compare_digest(session_tag, _session_tag(cookie)):
        return None
    return PollGrant(rental_id=rental_id, may_act=may_act, session_key=cookie, token=token)


def live_state(grant: PollGrant) -> PollState | None:
    """Return the granted rental's state if the session the token was issued to still exists.

    None: the rental is gone, the session ended (logout, expiry), or sessions are kept where this cannot look.
    """
    if settings.SESSION_ENGINE not in (DB_SESSIONS, CACHED_DB_SESSIONS):
        return None
    if settings.POLL_STATE_CACHE:
        state_key, session_key = _state_key(grant.rental_id), _session_cache_key(grant.session_key)
        found = cache.get_many([state_key, session_key] if session_key else [state_key])
        if state_key in found and (session_key is None or session_key in found):
            return PollState(*found[state_key])
    state = _read_state(grant)
    if state is not None and settings.POLL_STATE_CACHE:
        cache.set(_state_key(grant.rental_id), state, POLL_STATE_CACHE_SECONDS)
    return PollState(*state) if state else None


def forget_poll_state(rental_id: int) -> None:
    """Drop the cached poll state once the change that bumped the rental's version is committed.

    Every write that bumps `Rental.version` calls this (transitions, touches, claims, staff actions).
    """
    if settings.POLL_STATE_CACHE:
        transaction.on_commit(lambda: cache.delete(_state_key(rental_id)))


def _read_state(grant: PollGrant) -> tuple[int, str, str] | None:
    # Written out: the ORM spends far longer composing this query than SQLite or PostgreSQL spend running it.
    rental_table, session_table = Rental._meta.db_table, Session._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.version, r.status, r.public_id FROM {rental_table} r WHERE r.id = %s AND EXISTS "  # noqa: S608
            f"(SELECT 1 FROM {session_table} s WHERE s.session_key = %s AND s.expire_date > %s)",
            [grant.rental_id, grant.session_key, datetime.now(UTC)],
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1], str(row[2]).replace("-", ""))


@functools.lru_cache(maxsize=4096)
def _verified(token: str, secret_key: str) -> tuple[int, str, bool, int]:
    """Check a token's signature once per process; return (rental id, session tag, may act, issued at).

    Cached because a page polls with one token for 5 minutes and each check costs an HMAC and a JSON load.
    Raises for a forged or malformed token (not cached). `secret_key` is in the cache key, so a changed key
    never accepts a token signed with the old one.
    """
    rental_id, session_tag, may_act = signing.loads(token, key=secret_key, salt=TOKEN_SALT)
    issued_at = signing.b62_decode(token.rsplit(":", 2)[-2])  # the timestamp TimestampSigner signed
    return int(rental_id), str(session_tag), bool(may_act), issued_at


def _session_tag(session_key: str | None) -> str:
    # A digest, so the token never carries the session key itself.
    return hashlib.sha256((session_key or "").encode()).hexdigest()[:24]


def _session_cache_key(session_key: str) -> str | None:
    """The key `cached_db` keeps this session under, when sessions live in the shared cache."""
    if settings.SESSION_ENGINE == CACHED_DB_SESSIONS and settings.SESSION_CACHE_ALIAS == "default":
        return CACHED_DB_SESSION_PREFIX + session_key
    return None


def _state_key(rental_id: int) -> str:
    return f"rental-poll-state:{rental_id}"
