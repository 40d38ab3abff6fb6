"""Admin: read-only views of endpoints (never their secret), events and deliveries."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from notifications.models import Delivery, EmailPreference, Event, WebhookEndpoint


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    list_display = ["url", "customer", "created_at"]
    list_filter = ["customer"]
    search_fields = ["url", "customer__name"]
    exclude = ["secret_encrypted"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["id", "type", "customer", "created_at"]
    list_filter = ["type"]
    search_fields = ["id", "customer__name"]


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["event", "kind", "endpoint", "recipient", "status", "attempt_count", "last_status_code"]
    list_filter = ["status", "kind"]
    search_fields = ["event__id"]


@admin.register(EmailPreference)
class EmailPreferenceAdmin(ReadOnlyAdmin):
    list_display = ["user", "updated_at"]
