"""The dashboard's own API keys, and the stored answers that make `POST /api/v1/rentals` idempotent."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiKey(models.Model):
    """A user's key for the JSON API. Only a SHA-256 of the secret is kept; the key is shown once."""

    class Scope(models.TextChoices):
        READ = "read", "read: list fabrics and rentals"
        RENT = "rent", "rent: create rentals"
        MANAGE = "manage", "manage: terminate rentals"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    # The visible part of the key (`lcd_<prefix>_<secret>`), unique: the lookup goes by it.
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_sha256 = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (lcd_{self.prefix}_…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


class IdempotencyRecord(models.Model):
    """The first answer to a `POST /api/v1/rentals` with an `Idempotency-Key`, kept 24 h per user."""

    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", "In progress"
        DONE = "done", "Done"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    body_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When the current holder took the in-progress lock (a crashed holder's lock is taken over later).
    locked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="unique_idempotency_key_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"
