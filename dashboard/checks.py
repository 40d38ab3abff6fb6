"""Start-up checks (shown by `manage.py check` and `migrate`, so in the compose migrate container's log)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register


@register(Tags.security)
def metrics_token_set_in_production(app_configs: Any = None, **_kwargs: Any) -> list[CheckMessage]:
    """Warn that production keeps /metrics off until METRICS_TOKEN is set."""
    if settings.PRODUCTION and not settings.METRICS_TOKEN:
        return [
            Warning(
                "METRICS_TOKEN is not set: /metrics answers 404 in production.",
                hint="Set METRICS_TOKEN and have Prometheus send `Authorization: Bearer <token>`.",
                id="dashboard.W001",
            )
        ]
    return []
