"""The allauth provider of customers' identity providers (allauth's registry imports `<app>.provider`).

One class for all customers: each customer's configuration is an app of it (provider id `customer-<pk>`), built
by `sso.adapter` from the `SsoConfig` row with the secret decrypted in memory only.
"""

from __future__ import annotations

import secrets
from typing import Any

from allauth.socialaccount.providers.openid_connect.provider import OpenIDConnectProvider
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import urlencode

from sso.oidc.adapter import CustomerOidcAdapter

PROVIDER = "customer_sso"


class CustomerSsoProvider(OpenIDConnectProvider):
    id = PROVIDER
    name = "Company single sign-on"
    package = "sso.oidc"  # allauth includes sso/oidc/urls.py
    oauth2_adapter_class = CustomerOidcAdapter

    def get_login_url(self, request: HttpRequest, **kwargs: Any) -> str:
        url = reverse("sso_login", kwargs={"provider_id": self.app.provider_id})
        return f"{url}?{urlencode(kwargs)}" if kwargs else url

    def get_callback_url(self) -> str:
        return reverse("sso_callback", kwargs={"provider_id": self.app.provider_id})

    def serialize(self) -> dict[str, Any]:
        # allauth keeps a sign-in waiting for its two-factor code in the session and finds the provider again by
        # this id: the customer's (`customer-<pk>`, which sso.adapter builds the app for), not the class's id that
        # only a SocialApp row would answer to.
        return {**super().serialize(), "id": self.app.provider_id}

    def get_default_scope(self) -> list[str]:
        return ["openid", "email", "profile"]

    def redirect(
        self, request: HttpRequest, process: Any, next_url: str | None = None, data: Any = None, **kwargs: Any
    ) -> HttpResponse:
        # A nonce per sign-in, kept in allauth's stashed state; sso.adapter compares it with the ID token's.
        nonce = secrets.token_urlsafe(32)
        auth_params = kwargs.pop("auth_params", None) or self.get_auth_params()
        auth_params["nonce"] = nonce
        return super().redirect(request, process, next_url, data, auth_params=auth_params, nonce=nonce, **kwargs)


provider_classes = [CustomerSsoProvider]
