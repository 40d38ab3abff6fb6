"""Following each Lium account's events (`ops.pod_events`): where it got to, and the events no rental holds."""

from __future__ import annotations

from django.db import models

from accounts.models import UpstreamCredential


class PodEventCursor(models.Model):
    """Where following one credential's account events got to. `GET /users/me/events` has no cursor: the next ask
    is `since` the newest time seen (inclusive), and the events seen at exactly that time are dropped by digest."""

    credential = models.OneToOneField(UpstreamCredential, on_delete=models.CASCADE, related_name="+")
    since = models.DateTimeField(null=True, blank=True)
    seen = models.JSONField(default=list, blank=True)  # digests of the events at exactly `since`
    polled_at = models.DateTimeField(null=True, blank=True)  # one follow per interval: a conditional UPDATE on it
    # A 401 while the key works elsewhere: the backend does not open events to API keys. Said once, asked again
    # only after LIUM_EVENTS_REFUSED_RETRY_SECONDS.
    refused_at = models.DateTimeField(null=True, blank=True)
    refused_message = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"events of credential {self.credential_id} since {self.since}"


class UnheldPodEvent(models.Model):
    """An event of the account about a pod no rental holds (made outside the dashboard), for operators."""

    credential = models.ForeignKey(UpstreamCredential, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=32)
    happened_at = models.DateTimeField()
    pod_id = models.CharField(max_length=100)
    pod_name = models.CharField(max_length=100, blank=True)
    sub_event_type = models.CharField(max_length=64)
    source = models.CharField(max_length=120)  # who did it, in an operator's words (portal, CLI, API key ...)
    detail = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-happened_at", "-id"]
        indexes = [models.Index(fields=["-happened_at", "-id"], name="unheld_event_recent")]
        constraints = [models.UniqueConstraint(fields=["credential", "digest"], name="unique_unheld_event")]

    def __str__(self) -> str:
        return f"{self.happened_at:%Y-%m-%d %H:%M:%S} {self.pod_id}: {self.sub_event_type}"
