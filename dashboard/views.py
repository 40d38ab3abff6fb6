"""Site-wide views: the liveness and readiness probes, and the 500 handler."""

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from common.db_outage import database_lost, outage_response
from dashboard import health


def healthz(request: HttpRequest) -> JsonResponse:
    """Answer while the process is alive (no dependency is checked)."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database, the broker and the sweeper are fine, else 503 naming what is not."""
    failures = health.readiness()
    if failures:
        return JsonResponse({"status": "unavailable", "failing": failures}, status=503)
    return JsonResponse({"status": "ok"})


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 handler (it runs inside the `except`): a lost database that a middleware met is a 503, as
    one a view met is (`common.db_outage`); anything else is the usual 500."""
    exc = sys.exc_info()[1]
    if database_lost(exc):
        return outage_response(exc)  # type: ignore[arg-type]
    return defaults.server_error(request)
