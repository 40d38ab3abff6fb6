"""The login throttle: django-axes' database handler with a second, higher limit per address.

axes compares one failure limit with every lockout parameter, so it cannot say "5 for a username at an address,
30 for the address whatever the usernames". This handler keeps axes' (username, address) lock and adds the
address's own: its failures over every username within the cool-off, against LOGIN_ADDRESS_FAILURE_LIMIT.
A successful login clears only its own username's failures there (axes' reset), never the address's others.
Both locks see the address as `common.client_address.throttle_address` gives it: an IPv6 client by its /64.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest


def address_failures(request: HttpRequest) -> int:
    """Return the failed logins from the request's address within the cool-off, over every username."""
    attempts = AccessAttempt.objects.filter(
        ip_address=getattr(request, "axes_ip_address", None), attempt_time__gte=get_cool_off_threshold(request)
    )
    return attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0


class LoginLockoutHandler(AxesDatabaseHandler):
    """Lock a username at an address after AXES_FAILURE_LIMIT failures, and the address after
    LOGIN_ADDRESS_FAILURE_LIMIT failures over any usernames."""

    def is_locked(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> bool:
        if super().is_locked(request, credentials):
            return True
        return _locks_at_failure() and _address_locked(request)

    def user_login_failed(self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
        """Record the failure as axes does; the failure that brings the address to its limit locks it at once,
        as axes locks the username's at its own."""
        super().user_login_failed(sender, credentials, request=request, **kwargs)
        if request is None or getattr(request, "axes_locked_out", False) or not _locks_at_failure():
            return
        if _address_locked(request):
            request.axes_locked_out = True
            request.axes_credentials = credentials


def _locks_at_failure() -> bool:
    return bool(getattr(settings, "AXES_LOCK_OUT_AT_FAILURE", True))  # axes' own switch, True unless turned off


def _address_locked(request: HttpRequest) -> bool:
    locked = address_failures(request) >= settings.LOGIN_ADDRESS_FAILURE_LIMIT
    # The lockout page says which lock it is (its template reads this from the request).
    request.login_locked_by_address = locked  # type: ignore[attr-defined]
    return locked
