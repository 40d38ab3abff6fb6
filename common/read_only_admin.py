"""Admin classes for rows the Django admin shows but only the pages and services that own them change."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never added or changed."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RecordAdmin(ReadOnlyAdmin):
    """Shown, never added, changed or deleted."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
