"""Bench-only URLconf: the project's URLs plus `bench/trivial/`, the reference for the poll benchmark."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def trivial(request: HttpRequest) -> HttpResponse:
    """The cheapest Django answer: every middleware runs, no view work, no query."""
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("bench/trivial/", trivial, name="bench_trivial"),
    path("", include("dashboard.urls")),
]
