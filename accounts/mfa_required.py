"""Send a session that must enrol in two-factor (`accounts.two_factor`) to the enrolment page before anything else.

It reads one session key, so pages and polls cost no query; the pages of enrolment itself, sign-out, static
files, probes and the JSON API (API keys) pass.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from accounts.two_factor import ENROL_SESSION_KEY

Handler = Callable[[HttpRequest], HttpResponse]
# Where someone who must enrol may still go: enrolment (with its password re-check and recovery codes), sign-out.
ALLOWED_URL_NAMES = (
    "mfa_activate_totp",
    "mfa_index",
    "mfa_view_recovery_codes",
    "mfa_generate_recovery_codes",
    "mfa_download_recovery_codes",
    "mfa_reauthenticate",
    "account_reauthenticate",
    "logout",
    "account_logout",
)
ALLOWED_PREFIXES = ("/static/", "/api/", "/healthz", "/readyz", "/metrics")


def mfa_required_middleware(get_response: Handler) -> Handler:
    allowed: set[str] = set()

    def middleware(request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        if session is None or not session.get(ENROL_SESSION_KEY) or not request.user.is_authenticated:
            return get_response(request)
        if not allowed:
            allowed.update(reverse(name) for name in ALLOWED_URL_NAMES)
        if request.path in allowed or request.path.startswith(ALLOWED_PREFIXES):
            return get_response(request)
        messages.warning(request, "Your team requires two-factor authentication: set up an authenticator app first.")
        target = reverse("mfa_activate_totp")
        return HttpResponseClientRedirect(target) if getattr(request, "htmx", False) else redirect(target)

    return middleware
