"""Who must have two-factor authentication, and sending them to enrol at sign-in.

A member of a customer that requires it (`Customer.require_two_factor`, set by its admins on the team page), and
with MFA_REQUIRED_FOR_STAFF (on in production) operators and support, must have an authenticator app (TOTP).
Whoever signs in without one is marked in the session; `accounts.mfa_required` then sends every page to the
enrolment page until one is added; nor can they switch their authenticator app off (`DashboardMfaAdapter`). API
keys are not sessions and are unaffected.
"""

from __future__ import annotations

import time
from typing import Any

from allauth.account import app_settings as account_settings
from allauth.mfa.adapter import DefaultMFAAdapter
from allauth.mfa.models import Authenticator
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest

from accounts.models import Customer
from accounts.roles import is_staff_reader

ENROL_SESSION_KEY = "two_factor_enrol_required"


def two_factor_required(user: User) -> bool:
    """Return whether this user must have an authenticator app: a customer of theirs requires it, or they are
    staff (operators, support) and MFA_REQUIRED_FOR_STAFF is on."""
    if settings.MFA_REQUIRED_FOR_STAFF and is_staff_reader(user):
        return True
    return Customer.objects.filter(memberships__user_id=user.pk, require_two_factor=True).exists()


def has_totp(user: User) -> bool:
    return Authenticator.objects.filter(user_id=user.pk, type=Authenticator.Type.TOTP).exists()


def signed_in(*, request: HttpRequest, user: User, **_kwargs: Any) -> None:
    """At sign-in (Django's user_logged_in): mark the session of someone who must enrol and has not."""
    if request is None or not hasattr(request, "session"):
        return
    if two_factor_required(user) and not has_totp(user):
        request.session[ENROL_SESSION_KEY] = time.time()  # when: see enrolment_just_required
    else:
        request.session.pop(ENROL_SESSION_KEY, None)


def enrolment_just_required(request: HttpRequest | None) -> bool:
    """Return whether this session signed in moments ago (allauth's re-authentication timeout) and must enrol:
    its sign-in counts as the password check that adding an authenticator asks for."""
    since = getattr(request, "session", {}).get(ENROL_SESSION_KEY) if request is not None else None
    if not isinstance(since, (int, float)):
        return False
    return time.time() - since < account_settings.REAUTHENTICATION_TIMEOUT


def authenticator_added(*, request: HttpRequest | None, authenticator: Authenticator, **_kwargs: Any) -> None:
    """An authenticator app was added (allauth.mfa): the session may go anywhere again."""
    if request is not None and authenticator.type == Authenticator.Type.TOTP and hasattr(request, "session"):
        request.session.pop(ENROL_SESSION_KEY, None)


class DashboardMfaAdapter(DefaultMFAAdapter):
    def can_delete_authenticator(self, authenticator: Authenticator) -> bool:
        """Someone who must have two-factor keeps their authenticator app (allauth then says they cannot)."""
        if authenticator.type == Authenticator.Type.TOTP and two_factor_required(authenticator.user):
            return False
        return super().can_delete_authenticator(authenticator)
