"""How django-allauth fits this dashboard: no public sign-up, password guessing throttled by django-axes, the
client address as the throttles see it."""

from __future__ import annotations

import time
from typing import Any

from allauth.account import app_settings as account_settings
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.internal.flows.login import get_authentication_records
from allauth.account.internal.flows.reauthentication import get_reauthentication_flows
from django.http import HttpRequest

from accounts.two_factor import enrolment_just_required
from common.client_address import throttle_address


class DashboardAccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest) -> bool:
        """Accounts come from operators (create_user, the admin) and customer invitations, never a sign-up form."""
        return False

    def pre_authenticate(self, request: HttpRequest, **credentials: Any) -> None:
        """Leave password guessing to django-axes (per username+address and per address, `common.login_lockout`),
        so one lock applies to the sign-in page and the admin alike; allauth's "login_failed" limit then counts
        wrong two-factor codes only."""

    def is_reauthentication_required(self, *, app: str, **kwargs: Any) -> bool:
        """Someone sent to enrol in two-factor right after signing in is not asked for the password again."""
        if app == "allauth.mfa" and (enrolment_just_required(self.request) or self._signed_in_just_now_only()):
            return False
        return super().is_reauthentication_required(app=app, **kwargs)

    def _signed_in_just_now_only(self) -> bool:
        """Whether this user has nothing to re-authenticate with (no password, as people of a customer's SSO, and no
        authenticator yet) and signed in within allauth's re-authentication timeout: that sign-in is the check, or
        setting up two-factor would be refused to them (allauth answers 403 when no method is left)."""
        request = self.request
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or get_reauthentication_flows(user):
            return False
        times = [record.get("at") for record in get_authentication_records(request, user)]
        last = max((at for at in times if isinstance(at, (int, float))), default=None)
        return last is not None and time.time() - last < account_settings.REAUTHENTICATION_TIMEOUT

    def get_client_ip(self, request: HttpRequest) -> str:
        """The client's address behind TRUSTED_PROXY_COUNT proxies (the session list shows it)."""
        return throttle_address(request) or "0.0.0.0"  # noqa: S104 - an unknown address, never a bind
