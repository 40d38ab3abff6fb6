"""SSO pages: a customer's provider settings (its admins and operators) and "sign in with your company"."""

from __future__ import annotations

import logging

from allauth.socialaccount.adapter import get_adapter as get_social_adapter
from allauth.socialaccount.providers.base import AuthProcess
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from requests import RequestException

from accounts.audit import account_change_record
from accounts.models import Customer
from accounts.users import request_user
from billing.roles import may_manage_team
from billing.selectors import customer_get_for_user
from sso import services
from sso.domains import email_domain, sso_config_for_email
from sso.forms import SsoConfigForm, SsoStartForm
from sso.models import SsoConfig

logger = logging.getLogger(__name__)


def _managed_customer(request: HttpRequest, customer_id: int) -> Customer:
    """Return a customer this user manages: 404 for one they cannot see, 403 for one they only see."""
    customer = customer_get_for_user(user=request.user, customer_id=customer_id)
    if not may_manage_team(request.user, customer):
        raise PermissionDenied("Only this customer's admins and operators can change its single sign-on.")
    return customer


@require_http_methods(["GET", "POST"])
@login_required
def sso_config(request: HttpRequest, customer_id: int) -> HttpResponse:
    """Show and save the customer's OpenID Connect provider; the secret is never shown back."""
    customer = _managed_customer(request, customer_id)
    existing = SsoConfig.objects.filter(customer=customer).prefetch_related("domains").first()
    if request.method == "POST":
        form = SsoConfigForm(request.POST, customer_id=customer.pk, existing=existing)
        if form.is_valid():
            try:
                config = services.sso_config_save(customer=customer, **form.cleaned_data)
            except IntegrityError:  # another customer claimed one of the domains a moment ago
                form.add_error("domains", "One of these domains was just claimed by another customer.")
            else:
                domains = ", ".join(form.cleaned_data["domains"])
                what = f"saved single sign-on of {customer.name}: {config.issuer_url} for {domains}"
                what += " (mandatory)" if config.mandatory else ""
                account_change_record(user=request_user(request), what=what, request=request)
                messages.success(request, f"Single sign-on saved for {customer.name}.")
                return redirect("sso:config", customer_id=customer.pk)
    else:
        initial = {}
        if existing is not None:
            initial = {
                "issuer_url": existing.issuer_url,
                "client_id": existing.client_id,
                "domains": ", ".join(d.domain for d in existing.domains.all()),
                "mandatory": existing.mandatory,
            }
        form = SsoConfigForm(initial=initial, customer_id=customer.pk, existing=existing)
    callback = request.build_absolute_uri(reverse("sso_callback", kwargs={"provider_id": f"customer-{customer.pk}"}))
    return render(
        request, "sso/config.html", {"customer": customer, "form": form, "existing": existing, "callback": callback}
    )


@require_POST
@login_required
def sso_config_remove(request: HttpRequest, customer_id: int) -> HttpResponse:
    customer = _managed_customer(request, customer_id)
    services.sso_config_delete(customer=customer)
    what = f"removed single sign-on of {customer.name}"
    account_change_record(user=request_user(request), what=what, request=request)
    messages.success(request, f"Single sign-on removed for {customer.name}: its people sign in with a password.")
    return redirect("sso:config", customer_id=customer.pk)


@require_http_methods(["GET", "POST"])
def sso_start(request: HttpRequest) -> HttpResponse:
    """ "Sign in with your company": the e-mail's domain picks the customer's provider, which the browser goes to."""
    form = SsoStartForm(request.POST or None, initial={"email": request.GET.get("email", "")})
    next_url = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = ""
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        config = sso_config_for_email(email)
        if config is None:
            form.add_error(
                "email", f"No single sign-on is set up for @{email_domain(email)}: sign in with your password."
            )
        else:
            provider = get_social_adapter(request).get_provider(request, config.provider_id)
            try:
                response = provider.redirect(
                    request, AuthProcess.LOGIN, next_url=next_url or None, auth_params={"login_hint": email}
                )
            except (RequestException, OAuth2Error) as exc:
                logger.warning("sso provider unreachable customer=%s: %s", config.customer_id, type(exc).__name__)
                form.add_error(
                    None, f"{config.customer.name}'s sign-in provider cannot be reached right now. Try again."
                )
            else:
                if not isinstance(response, HttpResponseRedirect):
                    return response  # allauth's error page
                # A page that moves on by itself, not a redirect: the CSP's form-action 'self' would block a form
                # submission redirected to the provider's origin.
                return render(request, "sso/redirect.html", {"customer": config.customer, "url": response.url})
    return render(request, "sso/start.html", {"form": form, "next": next_url}, status=400 if form.errors else 200)
