"""Webhook endpoints, e-mail preferences, and the outbox: events and their deliveries."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from accounts.crypto import secret_decrypt, secret_encrypt
from accounts.models import Customer
from notifications.slack import url_shown


def new_event_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


class WebhookEndpoint(models.Model):
    """A customer's URL that receives signed events (Standard Webhooks), or a Slack incoming webhook that receives
    them as Slack messages (`notifications/slack.py`). The secret is encrypted at rest."""

    class Kind(models.TextChoices):
        STANDARD = "standard", "Standard Webhooks (signed JSON)"
        SLACK = "slack", "Slack incoming webhook (messages)"

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.CharField(max_length=2000)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.STANDARD)
    # Event types, or ["*"] for every type.
    events = models.JSONField(default=list)
    secret_encrypted = models.TextField(editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when its maker left the customer or stopped being its admin: it then receives nothing (kept, so the
    # admins see what stopped and why, and may delete it).
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["customer", "-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.customer}: {self.url}"

    @property
    def url_shown(self) -> str:
        """The URL as pages and the API show it: a Slack URL without its token (anyone holding it may post)."""
        return url_shown(self.url) if self.kind == self.Kind.SLACK else self.url

    def set_secret(self, secret: str) -> None:
        self.secret_encrypted = secret_encrypt(secret)

    def get_secret(self) -> str:
        """Return the clear `whsec_…` secret (only the delivery code should call this)."""
        return secret_decrypt(self.secret_encrypted)


class EmailPreference(models.Model):
    """Which event types reach a user by e-mail (none until the user picks some)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_preference")
    events = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.events) or 'no e-mail'}"


class Event(models.Model):
    """One thing that happened, written in the transaction of the change it reports. Append-only.

    `id` is the Standard Webhooks `webhook-id`: the same on every retry and redelivery. `body` is the exact
    JSON sent (serialised once), so every attempt signs and sends the same bytes.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_event_id, editable=False)
    type = models.CharField(max_length=50)
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="events")
    rental = models.ForeignKey("rentals.Rental", null=True, blank=True, on_delete=models.SET_NULL)
    body = models.TextField()
    # Makes an event that must happen once (a removal warning per rental per scheduled time) unique.
    dedup_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.id} {self.type}"


class Delivery(models.Model):
    """One event on its way to one webhook endpoint or one e-mail recipient, with its latest attempt."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook"
        EMAIL = "email", "E-mail"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Gave up"

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    endpoint = models.ForeignKey(
        WebhookEndpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Retries stop here: created + WEBHOOK_RETRY_WINDOW_SECONDS, or at creation for a one-try test send or redelivery.
    give_up_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_duration_ms = models.PositiveIntegerField(null=True, blank=True)
    last_response = models.CharField(max_length=500, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="delivery_status_due"),
            models.Index(fields=["endpoint", "-created_at"], name="delivery_endpoint_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.endpoint or self.recipient} ({self.status})"

    @property
    def one_try(self) -> bool:
        """A test send or a redelivery: it gives up when it is made (before its own creation time)."""
        return self.give_up_at <= self.created_at
