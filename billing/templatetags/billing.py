"""`{% runway_panel %}`: the balance runway on the ops overview with one line in its template."""

from __future__ import annotations

from typing import Any

from django import template

from billing.runway import runway_rows

register = template.Library()


@register.inclusion_tag("billing/_runway.html")
def runway_panel() -> dict[str, Any]:
    """Render the latest balance reading and runway of every active credential."""
    return {"runway": runway_rows()}
