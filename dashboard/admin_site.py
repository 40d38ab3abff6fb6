"""The Django admin site, with one guard every admin page goes through."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest, HttpResponseBadRequest
from django.http.response import HttpResponseBase

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


class DashboardAdminSite(admin.AdminSite):
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
