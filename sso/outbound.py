"""The HTTP session allauth reaches customers' providers with: each URL (discovery, keys, token, userinfo, all named
by the provider's own discovery document) is checked like a webhook's first, so in production a customer admin
cannot point the server at a private, loopback or link-local address; redirects are not followed."""

from __future__ import annotations

from typing import Any

import requests
from allauth.socialaccount import app_settings

from notifications.addresses import UnsafeUrl, url_check


def unsafe_reason(exc: UnsafeUrl) -> str:
    """The address check's reason, in a provider's words rather than a webhook's."""
    return (
        str(exc)
        .replace("webhooks go to public addresses only", "a provider must be on a public address")
        .replace("Webhooks go to", "A provider must listen on")
    )


class CheckedSession(requests.Session):
    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        target = str(url)
        try:
            url_check(target)
        except UnsafeUrl as exc:
            raise requests.exceptions.InvalidURL(
                f"The identity provider's address is refused: {unsafe_reason(exc)}"
            ) from exc
        kwargs["allow_redirects"] = False  # a redirect could lead anywhere, unchecked
        kwargs.setdefault("timeout", app_settings.REQUESTS_TIMEOUT)
        return super().request(method, target, *args, **kwargs)
