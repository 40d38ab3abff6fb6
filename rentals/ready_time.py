"""The time to ready, recorded once, the first time a rental becomes ready, whichever way it gets there (its
members all run, its fabric check passes, a failed check is kept, a refused delete hands it back)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from rentals.models import Rental


def first_ready_fields(rental: Rental) -> dict[str, Any]:
    """Return the time to ready to record the first time the rental is ready (a degraded one's recovery keeps it).

    Counted from the first send, when Lium could start on it (not from the submit: our queue is not its estimate's).
    """
    if rental.ready_at is not None:
        return {}
    now = timezone.now()
    started = rental.first_sent_at or rental.created_at
    return {"ready_at": now, "ready_seconds": max(0, round((now - started).total_seconds()))}
