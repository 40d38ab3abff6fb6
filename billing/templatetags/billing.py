"""`{% runway_panel %}` and `{% statement_panel %}`: the balance runway, operator notices and the statement's
disagreements on the ops overview, each with one line in its template; `{% quota_left customer %}`: what is left
of a customer's quotas, on the rent form and My rentals."""

from __future__ import annotations

from typing import Any

from django import template

from accounts.models import Customer
from billing.quotas import quota_lines
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


@register.inclusion_tag("billing/_quota_left.html")
def quota_left(customer: Customer) -> dict[str, Any]:
    """Render what is left of each quota of the customer (the rent form and My rentals; nothing when none set)."""
    lines = quota_lines(customer=customer)
    return {"customer": customer, "lines": lines, "full": any(not line.left for line in lines)}
