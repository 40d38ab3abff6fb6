"""Who may sign in through a customer's provider, and who may no longer use a password.

Pure rules over what the provider answered; `sso.adapter` applies them inside allauth's flow.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, User

from accounts.models import Membership
from sso.domains import email_domain
from sso.models import SsoConfig, SsoDomain


def sso_login_refusal(
    *, config: SsoConfig, state: dict[str, Any], data: dict[str, Any], is_existing: bool
) -> str | None:
    """Return why this sign-in is refused (a sentence for the person), or None when it may go on.

    `data` is what allauth keeps of the answer: the verified ID token's claims and the userinfo.
    """
    id_token = data.get("id_token") or {}
    userinfo = data.get("userinfo") or {}
    expected, got = str(state.get("nonce") or ""), str(id_token.get("nonce") or "")
    if not expected or not hmac.compare_digest(expected, got):
        return "The identity provider's answer does not belong to this sign-in (its nonce differs). Start again."
    if userinfo and userinfo.get("sub") != id_token.get("sub"):
        return "The identity provider's user information names another person than its ID token."
    if state.get("process") != "login":
        return "Single sign-on creates and signs in accounts; it cannot be connected to an existing one."
    email = str(userinfo.get("email") or id_token.get("email") or "")
    domains = set(config.domains.values_list("domain", flat=True))
    if email_domain(email) not in domains:
        owned = ", ".join(sorted(domains))
        return (
            f"{email or 'This account'} cannot sign in here: {config.customer.name}'s provider signs in people "
            f"of {owned} only."
        )
    if not is_existing and User.objects.filter(email__iexact=email).exists():
        # Never bind by e-mail alone: the provider's `sub` binds an account, and this one was made another way.
        return (
            f"An account with the address {email} already exists and is not linked to single sign-on. Sign in with "
            "its password, or ask an operator to link it."
        )
    return None


def _mandatory_domain(user: AbstractBaseUser) -> SsoDomain | None:
    """Return the domain of this user's address whose customer made SSO mandatory and has them as a member."""
    domain = email_domain(getattr(user, "email", "") or "")
    if not domain:
        return None
    found = SsoDomain.objects.filter(domain=domain, config__mandatory=True).select_related("config__customer").first()
    # Only the customer's own members: its admins cannot lock out people of another customer.
    if found is None or not Membership.objects.filter(user_id=user.pk, customer_id=found.config.customer_id).exists():
        return None
    return found


def sso_password_refusal(user: AbstractBaseUser) -> str | None:
    """Return why this user may not sign in with a password (their customer made SSO mandatory), or None."""
    found = _mandatory_domain(user)
    if found is None:
        return None
    return (
        f"{found.config.customer.name} requires single sign-on for @{found.domain} addresses: use "
        '"Sign in with your company" and your company account, not a password.'
    )


def sso_email_change_refusal(user: AbstractBaseUser, new_email: str) -> str | None:
    """Return why this user may not take `new_email` (it leaves the domains of a customer that made SSO mandatory
    for them, and would let them sign in with a password again), or None."""
    found = _mandatory_domain(user)
    if found is None or email_domain(new_email) in set(found.config.domains.values_list("domain", flat=True)):
        return None
    return (
        f"{found.config.customer.name} requires single sign-on for @{found.domain} addresses: your address stays "
        "at one of its domains (its admins can change the rule)."
    )
