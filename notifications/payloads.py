"""The body of an event: `{"id", "type", "created", "data"}`, serialised once.

A rental appears in `data.rental` exactly as `GET /api/v1/rentals/{id}` shows it. That shape belongs to the API
app, which registers it here when it starts (`api.apps`): notifications never imports the API, so the API can
import notifications (its webhook routes) without an import cycle.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from rentals.models import Rental

RentalRepresentation = Callable[[Rental], dict[str, Any]]
_rental_representation: RentalRepresentation | None = None


def rental_representation_register(representation: RentalRepresentation) -> None:
    """Set the function that turns a rental into its public JSON shape (called once, by the API app)."""
    global _rental_representation
    _rental_representation = representation


def rental_data(rental_id: int) -> dict[str, Any]:
    """Return a rental as the API shows it, read now (inside the caller's transaction)."""
    if _rental_representation is None:
        raise RuntimeError("No rental representation registered: is the 'api' app installed?")
    rows = Rental.objects.select_related("customer", "fabric_check").prefetch_related("attempts", "members")
    rental = rows.get(pk=rental_id)
    return _rental_representation(rental)


def event_body(*, event_id: str, event_type: str, created: datetime, data: dict[str, Any]) -> str:
    """Serialise an event once; every attempt sends (and signs) these exact characters."""
    return json.dumps(
        {"id": event_id, "type": event_type, "created": created, "data": data},
        cls=DjangoJSONEncoder,
        separators=(",", ":"),
    )
