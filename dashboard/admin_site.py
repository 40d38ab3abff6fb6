"""The Django admin site, with one guard every admin page goes through."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.http.response import HttpResponseBase
from django.shortcuts import resolve_url
from django.urls import reverse

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


class DashboardAdminSite(admin.AdminSite):
    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """Sign in through the dashboard's sign-in page (django-allauth: lockout, two-factor), never a second form;
        a signed-in user without admin rights is refused rather than sent back and forth."""
        from django.contrib.auth.views import redirect_to_login  # not at import: the admin loads before auth's models

        if request.user.is_authenticated:
            raise PermissionDenied("Your account has no access to the admin.")
        return redirect_to_login(request.GET.get("next") or reverse("admin:index"), resolve_url(settings.LOGIN_URL))

    def admin_view(self, view: View, cacheable: bool = False) -> View:
        """Refuse a query string with a NUL character before any admin view reads it.

        The list filters pass their values straight to the database, and PostgreSQL refuses NUL in text (a 500).
        """
        inner = super().admin_view(view, cacheable)

        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if any("\x00" in value for _name, values in request.GET.lists() for value in values):
                return HttpResponseBadRequest(
                    "A filter or search value holds a NUL character; remove it from the address.",
                    content_type="text/plain; charset=utf-8",
                )
            return inner(request, *args, **kwargs)

        return cast(View, guarded)


class DashboardAdminConfig(AdminConfig):
    default_site = "dashboard.admin_site.DashboardAdminSite"
