"""Admin: read-only views of endpoints (never their secret), events and deliveries."""

from __future__ import annotations

from django.contrib import admin

from common.read_only_admin import ReadOnlyAdmin
from notifications.models import Delivery, EmailPreference, Event, WebhookEndpoint


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
