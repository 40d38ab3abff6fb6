"""Site-wide views: the home redirect and the liveness probe."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect

from dashboard import health


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Send people to where they work: the fabrics to rent from."""
    return redirect("rentals:fabric_list")


def healthz(request: HttpRequest) -> JsonResponse:
    """Answer while the process is alive (no dependency is checked)."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database, the broker and the sweeper are fine, else 503 naming what is not."""
    failures = health.readiness()
    if failures:
        return JsonResponse({"status": "unavailable", "failing": failures}, status=503)
    return JsonResponse({"status": "ok"})
