"""`{% preset_picker customer %}`: the fabric page's "Start from a preset" (rentals cannot import presets)."""

from __future__ import annotations

from typing import Any

from django import template

from presets.models import Preset
from rentals.selectors import customer_list_for_renting

register = template.Library()


@register.inclusion_tag("presets/_picker.html", takes_context=True)
def preset_picker(context: dict[str, Any], customer: Any) -> dict[str, Any]:
    """The presets of the shown customer, when the user may rent for it."""
    request = context["request"]
    if customer is None or not customer_list_for_renting(user=request.user).filter(pk=customer.pk).exists():
        return {"presets": []}
    return {"presets": list(Preset.objects.filter(customer=customer)), "customer": customer}
