"""Turn rental state changes into events, inside the transaction that made the change (the outbox)."""

from __future__ import annotations

from typing import Any

from notifications.events import STATUS_EVENTS, TRANSITION_EVENTS
from notifications.services import event_emit
from rentals.models import Rental


def on_rental_status_changed(*, rental_id: int, from_status: str, to_status: str, **_kwargs: Any) -> None:
    """Emit the event for the state the rental moved into, and the transition's own, if they have one."""
    event_types = [
        event_type
        for event_type in (STATUS_EVENTS.get(to_status), TRANSITION_EVENTS.get((from_status, to_status)))
        if event_type is not None
    ]
    if not event_types:
        return
    customer_id = Rental.objects.filter(pk=rental_id).values_list("customer_id", flat=True).first()
    if customer_id is None:
        return
    for event_type in event_types:
        event_emit(customer=customer_id, type=event_type, rental_id=rental_id)
