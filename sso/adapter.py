"""allauth's social-account adapter: customers' providers as apps, and their sign-ins checked and provisioned.

Each customer's `SsoConfig` is an allauth app built here in memory (its secret decrypted only for the request
that needs it; no SocialApp row holds it). A sign-in through one is checked by `sso.signin`; a first sign-in
creates the account as a plain member of that customer only (an admin promotes them).
"""

from __future__ import annotations

import logging
from typing import Any

from allauth.account.adapter import get_adapter as get_account_adapter
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp, SocialLogin
from django.db import transaction
from django.http import HttpRequest
from django.shortcuts import render

from accounts.models import Membership
from sso.models import SsoConfig
from sso.outbound import CheckedSession
from sso.provider import PROVIDER
from sso.signin import sso_login_refusal

logger = logging.getLogger(__name__)
PROVIDER_ID_PREFIX = "customer-"


def _config_for_provider_id(provider_id: str) -> SsoConfig | None:
    customer_id = provider_id.removeprefix(PROVIDER_ID_PREFIX)
    if not provider_id.startswith(PROVIDER_ID_PREFIX) or not customer_id.isdigit():
        return None
    return SsoConfig.objects.select_related("customer").filter(customer_id=int(customer_id)).first()


def sso_app(config: SsoConfig) -> SocialApp:
    """The allauth app of a customer's provider (unsaved: the secret stays encrypted at rest)."""
    return SocialApp(
        provider=PROVIDER,
        provider_id=config.provider_id,
        name=config.customer.name,
        client_id=config.client_id,
        secret=config.get_client_secret(),
        settings={
            "server_url": config.issuer_url,
            "issuer": config.issuer_url,
            "oauth_pkce_enabled": True,
            "token_auth_method": "client_secret_post",
            "hidden": True,  # never listed on the login page: people reach it through their e-mail domain
        },
    )


class CustomerSsoAdapter(DefaultSocialAccountAdapter):
    def list_apps(self, request: HttpRequest, provider: str | None = None, client_id: str | None = None) -> list:
        apps = super().list_apps(request, provider=provider, client_id=client_id)
        config = _config_for_provider_id(provider or "")
        if config is not None and (client_id is None or client_id == config.client_id):
            apps.append(sso_app(config))
        return apps

    def get_requests_session(self) -> CheckedSession:
        return CheckedSession()

    def _config(self, sociallogin: SocialLogin) -> SsoConfig | None:
        if sociallogin.account.provider.startswith(PROVIDER_ID_PREFIX):
            return _config_for_provider_id(sociallogin.account.provider)
        return None

    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        config = self._config(sociallogin)
        if config is None:
            return
        reason = sso_login_refusal(
            config=config,
            state=sociallogin.state,
            data=sociallogin.account.extra_data,
            is_existing=sociallogin.is_existing,
        )
        if reason:
            logger.info("sso sign-in refused customer=%s: %s", config.customer_id, reason)
            raise ImmediateHttpResponse(render(request, "sso/refused.html", {"reason": reason}, status=403))

    def is_auto_signup_allowed(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return self._config(sociallogin) is not None or super().is_auto_signup_allowed(request, sociallogin)

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        # The customer's provider vouches for its people, as an invitation would.
        return self._config(sociallogin) is not None or super().is_open_for_signup(request, sociallogin)

    def save_user(self, request: HttpRequest, sociallogin: SocialLogin, form: Any = None) -> Any:
        config = self._config(sociallogin)
        if config is None:
            return super().save_user(request, sociallogin, form)
        with transaction.atomic():
            user = sociallogin.user
            user.set_unusable_password()
            get_account_adapter(request).populate_username(request, user)
            # allauth records the provider's address (with its `email_verified`) after the first save, and finds
            # none there; accounts.account_events would otherwise record the user's e-mail on that save.
            user.email = ""
            sociallogin.save(request)
            Membership.objects.create(user=user, customer=config.customer)
            logger.info("sso account created user=%s customer=%s", user.pk, config.customer_id)
        return user
