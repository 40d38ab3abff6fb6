"""E-mail domains: how a typed domain is checked, and which customer's provider an e-mail address signs in with."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Q

from sso.models import SsoConfig, SsoDomain

# Labels of letters, digits and inner hyphens, at least two of them, the last alphabetic (no IP addresses).
_DOMAIN = re.compile(r"\A(?=.{4,253}\Z)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]\Z")
# Domains no single customer owns: claiming one would route strangers to that customer's provider.
SHARED_MAIL_DOMAINS = frozenset(
    {
        "gmail.com",
        "googlemail.com",
        "outlook.com",
        "hotmail.com",
        "live.com",
        "yahoo.com",
        "icloud.com",
        "me.com",
        "aol.com",
        "proton.me",
        "protonmail.com",
        "gmx.net",
        "gmx.de",
        "web.de",
        "mail.ru",
        "yandex.ru",
        "qq.com",
        "163.com",
    }
)


def domain_clean(text: str) -> str:
    """Return the domain lower-cased without a leading '@'; raise ValidationError saying what to fix."""
    domain = text.strip().lower().removeprefix("@").rstrip(".")
    if not _DOMAIN.match(domain):
        raise ValidationError(
            f"'{text.strip()[:60]}' is not an e-mail domain: write it like acme.example (letters, digits, hyphens "
            "and dots, no spaces, no @ before it)."
        )
    if domain in SHARED_MAIL_DOMAINS:
        raise ValidationError(f"{domain} is a public mail service that no customer owns; list your company's domain.")
    return domain


def domains_clean(text: str) -> list[str]:
    """Return the distinct domains of a comma-, space- or line-separated list (at least one)."""
    parts = [part for part in re.split(r"[\s,;]+", text) if part]
    if not parts:
        raise ValidationError("List at least one e-mail domain, e.g. acme.example.")
    if len(parts) > 20:
        raise ValidationError("List at most 20 domains.")
    errors, domains = [], []
    for part in parts:
        try:
            domain = domain_clean(part)
        except ValidationError as exc:
            errors.extend(exc.messages)
            continue
        if domain not in domains:
            domains.append(domain)
    if errors:
        raise ValidationError(errors)
    return domains


def domains_taken(domains: list[str], *, customer_id: int) -> list[str]:
    """Return a message for each domain another customer already claims or whose addresses another customer's
    members use (so one customer cannot route, or lock out, another's people)."""
    problems = []
    claimed = set(
        SsoDomain.objects.filter(domain__in=domains)
        .exclude(config__customer_id=customer_id)
        .values_list("domain", flat=True)
    )
    for domain in domains:
        if domain in claimed:
            problems.append(f"{domain} is already claimed by another customer; an operator can sort out who owns it.")
        elif (
            User.objects.filter(email__iendswith=f"@{domain}", memberships__isnull=False)
            .exclude(memberships__customer_id=customer_id)
            .exists()
        ):
            problems.append(
                f"Members of another customer sign in with @{domain} addresses; an operator can sort out who owns it."
            )
    return problems


def members_not_linked(*, customer_id: int, domains: list[str]) -> list[str]:
    """Return the usernames of the customer's active members with an address at these domains who are not linked to
    its provider (mandatory SSO would refuse their password, and the provider cannot sign them in)."""
    at_domains = Q()
    for domain in domains:
        at_domains |= Q(email__iendswith=f"@{domain}")
    members = User.objects.filter(at_domains, is_active=True, memberships__customer_id=customer_id)
    linked = members.filter(socialaccount__provider=f"customer-{customer_id}")
    return list(members.exclude(pk__in=linked.values("pk")).order_by("username").values_list("username", flat=True))


def email_domain(email: str) -> str:
    """Return the lower-cased domain of an e-mail address ('' when it has none)."""
    _, at, domain = email.strip().rpartition("@")
    return domain.lower().rstrip(".") if at else ""


def sso_config_for_email(email: str) -> SsoConfig | None:
    """Return the provider configured for this address's domain, or None when its domain has none."""
    domain = email_domain(email)
    if not domain:
        return None
    found = SsoDomain.objects.select_related("config__customer").filter(domain=domain).first()
    return found.config if found is not None else None
