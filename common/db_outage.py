"""A database that is gone for a moment (PostgreSQL restarting or failing over) answers 503 with Retry-After.

Without this, a lost connection surfaced as a 500 ("something is broken") although trying again a few seconds
later works: the pool drops the dead connection (`common.db_pool`) and the next request gets a new one. The
middleware catches what a view raises; `dashboard.views.server_error` what a middleware raised; the JSON API
answers the same in its envelope (`api.errors`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Seconds a client is asked to wait: a restart takes a few; a failover a little longer.
RETRY_AFTER_SECONDS = 5
# A worker holding a result it must not lose writes it again this often while the database is gone.
RETRY_PAUSE_SECONDS = 1.0


def database_lost(exc: BaseException | None) -> bool:
    """Tell whether `exc` says the database cannot be reached (refused, cut, or no pooled connection in time)."""
    return isinstance(exc, (OperationalError, InterfaceError))


def outage_response(exc: BaseException) -> HttpResponse:
    """Return the 503 page; it renders without the request (no context processor may query the database)."""
    first_line = (str(exc).splitlines() or [""])[0][:200]
    logger.warning("database unavailable: %s: %s", type(exc).__name__, first_line)
    response = HttpResponse(render_to_string("503.html", {"retry_after": RETRY_AFTER_SECONDS}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseOutageMiddleware:
    """Turn a lost database in a view (or its template) into the 503 page."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return outage_response(exception) if database_lost(exception) else None


def through_outage(write: Callable[[], T], *, seconds: float) -> T:
    """Call `write` (one transaction) until it gets through a database outage of up to `seconds`; re-raise after.

    For a result that cannot be had again once it is lost: a fabric check that has removed its key from the
    members cannot measure a second time. The dead connection is dropped between tries, so the next one connects
    anew (outside a transaction: inside one, as in a test, the connection is left to its owner).
    """
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() >= deadline:
                raise
            logger.warning("database unavailable while writing a result; trying again: %s", type(exc).__name__)
            if not connection.in_atomic_block:
                connection.close_if_unusable_or_obsolete()
            time.sleep(RETRY_PAUSE_SECONDS)
