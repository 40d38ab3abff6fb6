"""Presets and capacity watches in the Django admin, read-only: customers make and end them on their pages (and a
watch's state changes only by its conditional UPDATE, `presets.watching`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from presets.models import CapacityWatch, Preset


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Preset)
class PresetAdmin(ReadOnlyAdmin):
    list_display = ("name", "customer", "gpu_type", "node_count", "max_price_per_node_hour", "created_at")
    list_filter = ("customer",)
    search_fields = ("name", "gpu_type")


@admin.register(CapacityWatch)
class CapacityWatchAdmin(ReadOnlyAdmin):
    list_display = ("pk", "customer", "gpu_type", "node_count", "auto_rent", "status", "expires_at", "ended_at")
    list_filter = ("status", "auto_rent", "customer")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
