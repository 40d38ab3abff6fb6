"""The OAuth2 adapter of a customer's provider: allauth's OpenID Connect adapter, with the ID token required and
its signature always checked (allauth skips the check for a token fetched over TLS, which the spec allows; a
customer's provider may be reached over anything, so we never rely on the transport)."""

from __future__ import annotations

from typing import Any

from allauth.socialaccount.internal import jwtkit
from allauth.socialaccount.models import SocialApp, SocialToken
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from allauth.utils import build_absolute_uri
from django.http import HttpRequest
from django.urls import reverse

DISCOVERY_KEYS = ("authorization_endpoint", "token_endpoint", "jwks_uri")


class CustomerOidcAdapter(OpenIDConnectOAuth2Adapter):
    @property
    def openid_config(self) -> dict:
        """The provider's discovery document; one without the endpoints the flow needs is refused, not a 500."""
        config = super().openid_config
        if not isinstance(config, dict) or not all(isinstance(config.get(key), str) for key in DISCOVERY_KEYS):
            raise OAuth2Error("The provider's discovery document lacks its authorization, token or JWKS endpoint.")
        return config

    def complete_login(self, request: HttpRequest, app: SocialApp, token: SocialToken, **kwargs: Any) -> Any:
        if not kwargs["response"].get("id_token"):
            raise OAuth2Error("The provider answered without an ID token.")
        return super().complete_login(request, app, token, **kwargs)

    def _decode_id_token(self, app: SocialApp, id_token: str) -> dict:
        # The issuer is the configured one, not whatever the discovery document claims.
        try:
            return jwtkit.verify_and_decode(
                credential=id_token,
                keys_url=self.openid_config["jwks_uri"],
                issuer=app.settings["issuer"],
                audience=app.client_id,
                lookup_kid=jwtkit.lookup_kid_jwk,
                verify_signature=True,
            )
        except (KeyError, TypeError, ValueError) as exc:  # a token without a kid, a JWKS that is not one
            raise OAuth2Error("The ID token or the provider's keys are malformed.") from exc

    def get_callback_url(self, request: HttpRequest, app: SocialApp) -> str:
        return build_absolute_uri(request, reverse("sso_callback", kwargs={"provider_id": self.provider_id}))
