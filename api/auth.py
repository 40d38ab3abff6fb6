"""Authenticate API requests by `X-API-Key` or `Authorization: Bearer`, like the upstream, and check scopes."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.security import APIKeyHeader, HttpBearer

from accounts.roles import is_operator, is_staff_reader
from api.errors import ApiError
from api.keys import (
    AuthFailure,
    api_key_authenticate,
    auth_failure_record,
    auth_failures_retry_after,
    request_rate_retry_after,
)
from api.models import ApiKey
from common.client_address import throttle_address

KEY_HINT = "Create a key at /profile/api-keys/ and send it as 'X-API-Key: lcd_…' or 'Authorization: Bearer lcd_…'."


def authenticate(request: HttpRequest, raw: str | None) -> ApiKey | None:
    """Return the key for `raw` (None when no key was sent); raise a 401 or 429 envelope otherwise."""
    if raw is None or raw == "":
        return None
    # The key is checked first, so a valid key is served even from an address that sent many bad ones (behind
    # a proxy, all customers share one). Only further bad attempts wait: a 256-bit secret is not guessable,
    # so the throttle only slows a flood of bad keys down (and shows up in the logs as 429s).
    result = api_key_authenticate(raw=raw)
    if isinstance(result, AuthFailure):
        ip = throttle_address(request) or "unknown"  # an IPv6 client counts by its /64
        retry_after = auth_failures_retry_after(ip=ip)
        if retry_after is not None:
            raise ApiError(
                429,
                "too_many_failed_attempts",
                "Too many failed API key attempts from this address.",
                hint=f"Wait {retry_after} s, then check the key you send.",
                headers={"Retry-After": str(retry_after)},
            )
        auth_failure_record(ip=ip)
        raise ApiError(401, result.code, result.message, hint=KEY_HINT)
    # Per-user request budget (API_RATE_PER_MINUTE), shared by all of the user's keys.
    wait = request_rate_retry_after(user_id=result.user_id)
    if wait is not None:
        raise ApiError(
            429,
            "rate_limited",
            "Too many API requests; the limit is per user and per minute.",
            hint=f"Wait {wait} s before the next request.",
            headers={"Retry-After": str(wait)},
        )
    request.user = result.user
    return result


class ApiKeyHeaderAuth(APIKeyHeader):
    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return authenticate(request, key)


class BearerAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        return authenticate(request, token)


AUTH = [ApiKeyHeaderAuth(), BearerAuth()]


def require_scope(request: HttpRequest, scope: str) -> ApiKey:
    """Return the request's key if it carries `scope`; else a 403 naming the scope (as the upstream words it)."""
    key: ApiKey = request.auth  # type: ignore[attr-defined]
    if scope not in (key.scopes or []):
        raise ApiError(
            403,
            "insufficient_scope",
            f"API key '{key.name}' does not have the '{scope}' scope.",
            hint=f"Create a key with the '{scope}' scope at /profile/api-keys/.",
        )
    return key


def require_writer(request: HttpRequest, scope: str) -> None:
    """Require `scope`, then refuse every write to support (read everything, change nothing) whatever the scopes."""
    require_scope(request, scope)
    user = request.user
    if is_staff_reader(user) and not is_operator(user):
        raise ApiError(
            403,
            "read_only_role",
            "Support can look at rentals but not change them.",
            hint="Ask an operator or a member of the customer to make this change.",
        )
