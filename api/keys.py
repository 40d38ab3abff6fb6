"""Create, revoke and check the dashboard's API keys, and rate-limit failed attempts per client IP.

A key reads `lcd_<prefix>_<secret>`: the 8-character prefix is stored in clear (it is how a key is found and
how the profile page names it), the secret only as its SHA-256. A secret has 256 random bits, so a plain
SHA-256 is enough (a slow password hash protects guessable passwords, not random tokens), and the
comparison uses `hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from api.models import ApiKey
from common import ratelimit

KEY_PREFIX = "lcd"
KEY_RE = re.compile(r"\Alcd_([0-9a-f]{8})_([A-Za-z0-9_-]{20,100})\Z")
# The name's column; the profile form bounds it too, the management command only through here.
NAME_MAX_LENGTH = 100
ALL_SCOPES = tuple(ApiKey.Scope.values)
# `last_used_at` is written at most this often per key, so a busy client does not write on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_key_create(
    *, user: User, name: str, scopes: list[str], expires_at: datetime | None = None
) -> tuple[ApiKey, str]:
    """Create a key and return it with its full text, which is never available again."""
    name = name.strip()
    if not name:
        raise ValidationError("Give the key a name, so you can tell your keys apart.")
    if len(name) > NAME_MAX_LENGTH:
        raise ValidationError(f"A key name is at most {NAME_MAX_LENGTH} characters; choose a shorter one.")
    unknown = sorted(set(scopes) - set(ALL_SCOPES))
    if unknown or not scopes:
        raise ValidationError(f"Choose one or more scopes among: {', '.join(ALL_SCOPES)}.")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError("The expiry must be in the future.")
    while True:
        prefix = secrets.token_hex(4)
        if not ApiKey.objects.filter(prefix=prefix).exists():
            break
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        secret_sha256=secret_hash(secret),
        scopes=[scope for scope in ALL_SCOPES if scope in scopes],
        expires_at=expires_at,
    )
    return key, f"{KEY_PREFIX}_{prefix}_{secret}"


def api_key_revoke(*, user: User, key_id: int) -> bool:
    """Revoke one of the user's keys; return whether it was active until now."""
    return bool(ApiKey.objects.filter(pk=key_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now()))


def api_key_list_for_user(*, user: User):  # type: ignore[no-untyped-def]
    """Return the user's keys, newest first (revoked ones too, so the page shows what happened)."""
    return ApiKey.objects.filter(user=user)


@dataclass(frozen=True)
class AuthFailure:
    code: str
    message: str


def api_key_authenticate(*, raw: str) -> ApiKey | AuthFailure:
    """Return the usable key for `raw`, or why it is refused (the same words whether or not a prefix exists)."""
    match = KEY_RE.match(raw.strip())
    invalid = AuthFailure("invalid_api_key", "Invalid API key.")
    if match is None:
        return invalid
    prefix, secret = match.groups()
    key = ApiKey.objects.select_related("user").filter(prefix=prefix).first()
    # Hash even when no key has this prefix, so timing does not say which prefixes exist.
    given = secret_hash(secret)
    if key is None or not hmac.compare_digest(given, key.secret_sha256):
        return invalid
    if key.revoked_at is not None:
        return AuthFailure("api_key_revoked", "This API key was revoked.")
    if key.is_expired:
        return AuthFailure("api_key_expired", "This API key has expired.")
    if not key.user.is_active:
        return invalid
    _touch(key)
    return key


def _touch(key: ApiKey) -> None:
    """Record the use, at most once a minute per key (a conditional UPDATE, so concurrent requests write once)."""
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    ApiKey.objects.filter(pk=key.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
    key.last_used_at = now


# --- Failed-attempt rate limit -----------------------------------------------------------------------------
# A fixed one-minute window per client IP in the cache. Only attempts that present a key count: a request
# with no key at all cannot guess anything.


def _window(now: float) -> tuple[str, int]:
    window = settings.API_AUTH_FAILURE_WINDOW_SECONDS
    start = int(now // window) * window
    return str(start), start + window


def auth_failures_retry_after(*, ip: str) -> int | None:
    """Return the seconds to wait when this IP has used up its failed attempts in this window, else None."""
    now = time.time()
    window, ends = _window(now)
    count = cache.get(f"api-auth-fail:{ip}:{window}", 0)
    if count >= settings.API_AUTH_FAILURE_LIMIT:
        return max(1, int(ends - now) + 1)
    return None


def auth_failure_record(*, ip: str) -> None:
    window, _ends = _window(time.time())
    cache_key = f"api-auth-fail:{ip}:{window}"
    cache.add(cache_key, 0, timeout=settings.API_AUTH_FAILURE_WINDOW_SECONDS + 5)
    try:
        cache.incr(cache_key)
    except ValueError:  # expired between add and incr
        cache.set(cache_key, 1, timeout=settings.API_AUTH_FAILURE_WINDOW_SECONDS + 5)


def request_rate_retry_after(*, user_id: int) -> int | None:
    """Count one request for this user; return the seconds to wait when over API_RATE_PER_MINUTE (0: no limit)."""
    limit = settings.API_RATE_PER_MINUTE
    if limit <= 0:
        return None
    return ratelimit.hit(scope="api-rate", key=str(user_id), limit=limit)
