"""The login and callback endpoints of customers' providers (allauth's views with our adapter).

allauth asks the provider's discovery document before its own error handling starts; a provider that cannot be
reached or answers nonsense there gets allauth's "sign-in failed" page here, never a 500.
"""

from __future__ import annotations

from collections.abc import Callable

from allauth.account.internal.decorators import login_not_required
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.helpers import render_authentication_error
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView, OAuth2LoginView
from django.http import Http404, HttpRequest, HttpResponse
from requests import RequestException

from sso.oidc.adapter import CustomerOidcAdapter


def _run(
    view_class: type[OAuth2LoginView] | type[OAuth2CallbackView], request: HttpRequest, provider_id: str
) -> HttpResponse:
    try:
        adapter = CustomerOidcAdapter(request, provider_id)
        view: Callable[[HttpRequest], HttpResponse] = view_class.adapter_view(adapter)
        return view(request)
    except SocialApp.DoesNotExist as exc:
        raise Http404("No such single sign-on provider.") from exc
    except (RequestException, OAuth2Error) as exc:
        provider = get_adapter(request).get_provider(request, provider_id)
        return render_authentication_error(request, provider, exception=exc)


@login_not_required
def login(request: HttpRequest, provider_id: str) -> HttpResponse:
    return _run(OAuth2LoginView, request, provider_id)


@login_not_required
def callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    return _run(OAuth2CallbackView, request, provider_id)
