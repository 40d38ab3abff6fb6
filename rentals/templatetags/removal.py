"""`{{ at|removes_in }}`: how long until a scheduled removal, as the countdown shows it ("3 h 12 min")."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()


def countdown_text(at: datetime, now: datetime) -> str:
    """Return the time left until `at` in days, hours and minutes ("due now" once it has passed)."""
    seconds = int((at - now).total_seconds())
    if seconds <= 0:
        return "due now"
    if seconds < 60:
        return "less than a minute"
    minutes = seconds // 60
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days} d"] if days else []
    if days or hours:
        parts.append(f"{hours} h")
    if not days:
        parts.append(f"{minutes} min")
    return " ".join(parts)


@register.filter
def removes_in(at: datetime | None) -> str:
    """Return the countdown text for a removal time ("" for none)."""
    return countdown_text(at, timezone.now()) if at else ""
