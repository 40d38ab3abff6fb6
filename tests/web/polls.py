"""How a test browser finds and follows a rental page's poller (the `rental` fixture is in conftest.py)."""

from __future__ import annotations

import re

from django.test import Client


def poller_url(html: str) -> str:
    """The URL the page's poller will ask next, as htmx would follow it."""
    found = re.search(r'<div id="poller" hx-get="([^"]+)"', html)
    assert found, "the page polls"
    return found.group(1).replace("&amp;", "&")


def tags(html: str, name: str) -> list[dict[str, str]]:
    """The attributes of every `<name ...>` tag in `html`, in order."""
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', tag)) for tag in re.findall(rf"<{name}\b([^>]*)>", html)]


def logged_in(user, *, enforce_csrf_checks: bool = False) -> Client:  # type: ignore[no-untyped-def]
    """A browser of its own (its own session cookie), logged in as `user`."""
    browser = Client(enforce_csrf_checks=enforce_csrf_checks)
    browser.force_login(user)
    return browser
