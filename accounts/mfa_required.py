"""Send a session that must enrol in two-factor (`accounts.two_factor`) to the enrolment page before anything else.

It reads one session key, so pages cost no query for it. Some views pass without the session being read: those of
enrolment itself and sign-out, probes, the JSON API (API keys), and the rental page's poll, which checks its own
token (issued only by a rental page, which this sends to enrolment first) and never loads the session; a poll
without a valid token is checked in full, this check included (`enrolment_redirect`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from accounts.two_factor import ENROL_SESSION_KEY
from common.db_outage import outage_response

Handler = Callable[[HttpRequest], HttpResponse]
# Where someone who must enrol may still go (by URL name): enrolment with its password re-check and recovery
# codes, sign-out, probes, and the poll (see above).
ALLOWED_URL_NAMES = frozenset(
    {
        "mfa_activate_totp",
        "mfa_index",
        "mfa_view_recovery_codes",
        "mfa_generate_recovery_codes",
        "mfa_download_recovery_codes",
        "mfa_reauthenticate",
        "account_reauthenticate",
        "logout",
        "account_logout",
        "healthz",
        "readyz",
        "metrics",
        "rentals:rental_progress",
    }
)
ALLOWED_NAMESPACES = frozenset({"api-v1"})  # API keys, not sessions


class MfaRequiredMiddleware:
    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> HttpResponse | None:
        match = request.resolver_match
        if match is not None and (match.view_name in ALLOWED_URL_NAMES or ALLOWED_NAMESPACES & set(match.namespaces)):
            return None
        return enrolment_redirect(request)


def enrolment_redirect(request: HttpRequest) -> HttpResponse | None:
    """Send a signed-in session that must enrol to the enrolment page (None: it need not)."""
    session = getattr(request, "session", None)
    try:
        if session is None or not session.get(ENROL_SESSION_KEY) or not request.user.is_authenticated:
            return None
    except (OperationalError, InterfaceError) as exc:  # the session's first read: a lost database is a 503
        return outage_response(exc)
    messages.warning(request, "Your team requires two-factor authentication: set up an authenticator app first.")
    target = reverse("mfa_activate_totp")
    return HttpResponseClientRedirect(target) if getattr(request, "htmx", False) else redirect(target)
