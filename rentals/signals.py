"""Signals other apps listen to, so rentals never import them (notifications → rentals, never back).

`rental_status_changed` is sent by `rentals.transitions.rental_transition` right after its conditional UPDATE
moved the row, inside the same transaction: a receiver's writes commit or roll back with the state change.
Keyword arguments: `rental_id`, `from_status`, `to_status`; the sender is `Rental`.
"""

from django.dispatch import Signal

rental_status_changed = Signal()
