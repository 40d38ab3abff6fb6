"""The login and callback endpoints of customers' providers (allauth's views with our adapter)."""

from __future__ import annotations

from allauth.account.internal.decorators import login_not_required
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView, OAuth2LoginView
from django.http import Http404, HttpRequest, HttpResponse

from sso.oidc.adapter import CustomerOidcAdapter


@login_not_required
def login(request: HttpRequest, provider_id: str) -> HttpResponse:
    try:
        return OAuth2LoginView.adapter_view(CustomerOidcAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist as exc:
        raise Http404("No such single sign-on provider.") from exc


@login_not_required
def callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    try:
        return OAuth2CallbackView.adapter_view(CustomerOidcAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist as exc:
        raise Http404("No such single sign-on provider.") from exc
