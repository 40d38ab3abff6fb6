"""How a test browser finds and follows a rental page's poller (the `rental` fixture is in conftest.py)."""

from __future__ import annotations

from django.test import Client

from tests.matching import must_search


def poller_url(html: str) -> str:
    """The URL the page's poller will ask next, as htmx would follow it."""
    return must_search(r'<div id="poller" hx-get="([^"]+)"', html).group(1).replace("&amp;", "&")


def logged_in(user) -> Client:  # type: ignore[no-untyped-def]
    """A browser of its own (its own session cookie), logged in as `user`."""
    browser = Client()
    browser.force_login(user)
    return browser
