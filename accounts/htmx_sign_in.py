"""A part of a page that htmx fetches (a poll, a refresh) after the session ended: send the whole page to sign-in.

htmx follows a redirect itself and would swap the sign-in page into the polled part of the page; an `HX-Redirect`
answer makes it load the sign-in page instead, with `next` the page the user was on (same site only).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django_htmx.http import HttpResponseClientRedirect

Handler = Callable[[HttpRequest], HttpResponse]


def htmx_sign_in_middleware(get_response: Handler) -> Handler:
    """Turn a redirect to the sign-in page, answering an htmx request, into a whole-page `HX-Redirect`."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        htmx = getattr(request, "htmx", None)
        if not htmx or response.status_code != 302:
            return response
        sign_in = resolve_url(settings.LOGIN_URL)
        if urlsplit(response["Location"]).path != sign_in:
            return response
        # `current_url_abs_path` is None for a page on another site: then no `next` at all.
        page = htmx.current_url_abs_path
        return HttpResponseClientRedirect(redirect_to_login(page, sign_in)["Location"] if page else sign_in)

    return middleware
