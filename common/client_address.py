"""The client's address and login name as the throttles see them (django-axes, the API's failed-key throttle)."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    """Return the address of the client, trusting exactly TRUSTED_PROXY_COUNT proxies in front of the app.

    Each proxy appends the address it received the request from to X-Forwarded-For, so with N proxies the
    client is the N-th entry from the right; entries further left are whatever the client sent. With no
    trusted proxy, or a request that did not pass through all of them, the peer address (REMOTE_ADDR) is used.
    None when no valid address is known (axes stores a null address).
    """
    peer = _valid(request.META.get("REMOTE_ADDR", "")) or None
    count = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0) or 0)
    if count <= 0:
        return peer
    forwarded = [part.strip() for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < count:
        return peer
    return _valid(forwarded[-count]) or peer


def throttle_address(request: HttpRequest) -> str | None:
    """Return the address the throttles count under: an IPv4 address as it is, an IPv6 one as its /64 network.

    Whoever is given an IPv6 /64 (the usual smallest assignment) can use any of its 2^64 addresses, so each
    address on its own would be a fresh budget of guesses. The lockout page and axes' records show the network.
    """
    address = client_ip(request)
    if address is None or ":" not in address:
        return address
    return str(ipaddress.ip_network(f"{address}/64", strict=False).network_address)


def _valid(value: str) -> str:
    """Return `value` as a normalised IP address, or "" (axes stores it in an address column)."""
    try:
        return str(ipaddress.ip_address(str(value).strip()))
    except ValueError:
        return ""


# django-axes stores the name of every failed login in a column of this many characters.
THROTTLE_USERNAME_MAX = 255


def login_username(request: HttpRequest, credentials: dict[str, object] | None) -> str | None:
    """Return the username a login tried, as the throttle records and locks it.

    An e-mail address counts as the username of its account. Django's login forms do not enforce the username's
    length, so a longer name is cut to the column's length: otherwise PostgreSQL refuses the record and the login
    page answers 500.
    """
    if credentials:
        value = credentials.get("username") or credentials.get("email")
    else:
        post = getattr(request, "POST", {})
        value = post.get("login") or post.get("username")  # allauth's sign-in form names it "login"
    if value is None:
        return None
    return _account_username(str(value))[:THROTTLE_USERNAME_MAX]


def _account_username(login: str) -> str:
    """Return the username of the account a login signs in to, so guessing by e-mail, by username and by the
    username in other letter cases (allauth matches usernames case-insensitively) share one lock; anything that
    names no account as it is."""
    from django.contrib.auth.models import User

    lookup = "email__iexact" if "@" in login else "username__iexact"
    username = User.objects.filter(**{lookup: login}).order_by("pk").values_list("username", flat=True).first()
    return username or login
