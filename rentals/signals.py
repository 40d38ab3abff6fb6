"""Signals other apps listen to, so rentals never import them (notifications → rentals, never back).

`rental_status_changed` is sent by `rentals.transitions.rental_transition` right after its conditional UPDATE
moved the row, inside the same transaction: a receiver's writes commit or roll back with the state change.
Keyword arguments: `rental_id`, `from_status`, `to_status`; the sender is `Rental`.
"""

from django.dispatch import Signal

rental_status_changed = Signal()

# Sent by the submit service inside its transaction, with the customer row locked (`select_for_update`), before
# the rental is inserted: a receiver refuses the order by raising ValidationError (billing's monthly budget and
# quotas). Keyword arguments: `customer`, `adding_per_hour` (Decimal USD/hour), `adding_gpus` (int); the sender
# is `Customer`.
order_checking = Signal()

# Sent by the pod poller after each listing of a credential: `refused` is the reason a listing was refused as
# unreadable or too large ("" when one was read), so an operator hears of it (billing's operator notices).
# Keyword arguments: `credential_id`, `refused`; the sender is `Rental`.
pod_listing_read = Signal()

# Sent by `rentals.orders.scheduled` when a scheduled rental made from a preset is due, outside any transaction: the
# presets app answers with the cheapest matching nodes now, `(fabric_id, executor_ids)`, or a str saying why none
# fit. Keyword arguments: `rental` (its `preset_id` set), `listing` (the credential's offers, just read); the
# sender is `Rental`.
scheduled_nodes_picking = Signal()
