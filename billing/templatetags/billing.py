"""`{% runway_panel %}` and `{% statement_panel %}`: the balance runway, operator notices and the statement's
disagreements on the ops overview, each with one line in its template."""

from __future__ import annotations

from typing import Any

from django import template

from billing.runway import runway_rows
from billing.statement import statement_panel_context

register = template.Library()


@register.inclusion_tag("billing/_runway.html")
def runway_panel() -> dict[str, Any]:
    """Render the latest balance reading and runway of every active credential."""
    return {"runway": runway_rows()}


@register.inclusion_tag("billing/_statement.html")
def statement_panel() -> dict[str, Any]:
    """Render the open operator notices and the pod-days where Lium's statement disagrees with our cost."""
    return statement_panel_context()
