"""The SSO settings form (team page) and the "sign in with your company" form (login page)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from allauth.account.forms import AddEmailForm, LoginForm
from django import forms
from django.contrib.auth.models import User
from django.db.models import Q

from notifications.addresses import UnsafeUrl, url_check
from sso.domains import domains_clean, domains_taken, members_not_linked
from sso.models import SsoConfig
from sso.outbound import unsafe_reason
from sso.signin import sso_email_change_refusal, sso_password_refusal

# Plain http only to this machine: the test provider and a developer's own; a real provider is https.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def issuer_clean(text: str) -> str:
    """Return the issuer URL without a trailing slash; raise ValidationError saying what to fix."""
    url = text.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        parts, host = None, ""
    if parts is None or not host or parts.scheme not in ("https", "http"):
        raise forms.ValidationError("Enter the provider's issuer URL, e.g. https://login.acme.example.")
    if parts.scheme == "http" and host not in LOCAL_HOSTS:
        raise forms.ValidationError("The issuer must use https (plain http is accepted only for 127.0.0.1).")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise forms.ValidationError("The issuer URL has no query, fragment or credentials: just scheme, host and path.")
    if "/.well-known/" in parts.path:
        raise forms.ValidationError("Enter the issuer itself, without /.well-known/openid-configuration.")
    try:
        url_check(url)  # in production: a public address only (checked again on every request)
    except UnsafeUrl as exc:
        raise forms.ValidationError(f"The issuer cannot be used: {unsafe_reason(exc)}") from exc
    return url


class SsoConfigForm(forms.Form):
    issuer_url = forms.CharField(
        label="Issuer URL",
        max_length=500,
        help_text="Its discovery document is ISSUER/.well-known/openid-configuration.",
    )
    client_id = forms.CharField(label="Client id", max_length=255)
    client_secret = forms.CharField(
        label="Client secret",
        required=False,
        max_length=500,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted and never shown again; leave empty to keep the one saved.",
    )
    domains = forms.CharField(
        label="E-mail domains",
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="People with these addresses sign in through this provider, e.g. acme.example, acme-labs.example.",
    )
    mandatory = forms.BooleanField(
        label="SSO is mandatory", required=False, help_text="Your members of these domains cannot use a password."
    )

    def __init__(self, *args: Any, customer_id: int, existing: SsoConfig | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.customer_id = customer_id
        self.existing = existing

    def clean_issuer_url(self) -> str:
        return issuer_clean(self.cleaned_data["issuer_url"])

    def clean_client_id(self) -> str:
        client_id = self.cleaned_data["client_id"]
        if any(ch.isspace() for ch in client_id):
            raise forms.ValidationError(
                "The client id has no spaces or line breaks: paste it as the provider shows it."
            )
        return client_id

    def clean_client_secret(self) -> str:
        secret = self.cleaned_data["client_secret"]
        if secret != secret.strip() or any(ch in secret for ch in "\r\n"):
            raise forms.ValidationError("The client secret has no leading or trailing spaces or line breaks.")
        if not secret and self.existing is None:
            raise forms.ValidationError("Enter the client secret the provider gave for this client.")
        return secret

    def clean_domains(self) -> list[str]:
        domains = domains_clean(self.cleaned_data["domains"])
        problems = domains_taken(domains, customer_id=self.customer_id)
        if problems:
            raise forms.ValidationError(problems)
        return domains

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        domains = cleaned.get("domains")
        if cleaned.get("mandatory") and domains:
            unlinked = members_not_linked(customer_id=self.customer_id, domains=domains)
            if unlinked:
                names = ", ".join(unlinked[:10]) + (f" and {len(unlinked) - 10} more" if len(unlinked) > 10 else "")
                self.add_error(
                    "mandatory",
                    "SSO cannot be mandatory yet: these members of its domains sign in with a password and are not "
                    f"linked to your provider, so they could no longer sign in at all: {names}. Save it optional, "
                    "and have an operator link them first.",
                )
        return cleaned


class SsoStartForm(forms.Form):
    email = forms.EmailField(label="Work e-mail", max_length=254)


class SsoLoginForm(LoginForm):
    """allauth's sign-in form, refusing a password where the person's customer made single sign-on mandatory.

    Checked before the password: a refused person learns nothing about it, and no failure is counted."""

    def clean(self) -> dict[str, Any]:
        login = str(self.cleaned_data.get("login") or "").strip()
        if login:
            for user in User.objects.filter(Q(username__iexact=login) | Q(email__iexact=login))[:2]:
                reason = sso_password_refusal(user)
                if reason:
                    raise forms.ValidationError(reason)
        return super().clean()


class SsoAddEmailForm(AddEmailForm):
    """allauth's new-address form, keeping a member under mandatory single sign-on at their customer's domains."""

    def clean_email(self) -> str:
        reason = sso_email_change_refusal(self.user, str(self.cleaned_data.get("email") or ""))
        if reason:
            raise forms.ValidationError(reason)
        return super().clean_email()
