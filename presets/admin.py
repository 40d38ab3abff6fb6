"""Presets and capacity watches in the Django admin, read-only: customers make and end them on their pages (and a
watch's state changes only by its conditional UPDATE, `presets.watching`)."""

from __future__ import annotations

from django.contrib import admin

from common.read_only_admin import ReadOnlyAdmin, RecordAdmin
from presets.models import CapacityWatch, Preset


@admin.register(Preset)
class PresetAdmin(ReadOnlyAdmin):
    list_display = ("name", "customer", "gpu_type", "node_count", "max_price_per_node_hour", "created_at")
    list_filter = ("customer",)
    search_fields = ("name", "gpu_type")


@admin.register(CapacityWatch)
class CapacityWatchAdmin(RecordAdmin):
    list_display = ("pk", "customer", "gpu_type", "node_count", "auto_rent", "status", "expires_at", "ended_at")
    list_filter = ("status", "auto_rent", "customer")
