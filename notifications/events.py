"""The event types a customer can subscribe to, and which rental state emits which."""

from __future__ import annotations

from rentals.states import RentalStatus

RENTAL_RENTED = "rental.rented"
RENTAL_READY = "rental.ready"
RENTAL_VERIFIED = "rental.verified"
RENTAL_CHECK_FAILED = "rental.check_failed"
RENTAL_DEGRADED = "rental.degraded"
RENTAL_UNKNOWN = "rental.unknown"
RENTAL_REFUSED = "rental.refused"
RENTAL_FAILED = "rental.failed"
RENTAL_TERMINATED = "rental.terminated"
RENTAL_REMOVAL_SOON = "rental.removal_soon"
BUDGET_THRESHOLD = "budget.threshold"
# A capacity watch matched (presets app): the nodes, a link to the rent form on them, the rental if it rented.
CAPACITY_AVAILABLE = "capacity.available"
# Sent only to the one endpoint a user asked to test; nobody subscribes to it.
WEBHOOK_TEST = "webhook.test"
ALL = "*"

# Type -> what a person reads on the preferences page and in an e-mail's subject.
EVENT_TYPES: dict[str, str] = {
    RENTAL_RENTED: "Cluster rented (nodes starting)",
    RENTAL_READY: "Cluster ready (every node running)",
    RENTAL_VERIFIED: "Fabric check passed (verified cluster ready)",
    RENTAL_CHECK_FAILED: "Fabric check failed (a slow node is named)",
    RENTAL_DEGRADED: "Cluster degraded (a node failed)",
    RENTAL_UNKNOWN: "Outcome unknown (support is checking)",
    RENTAL_REFUSED: "Order refused (the reason is given)",
    RENTAL_FAILED: "Order failed (Lium unreachable)",
    RENTAL_TERMINATED: "Cluster removed",
    RENTAL_REMOVAL_SOON: "Scheduled removal within the hour",
    BUDGET_THRESHOLD: "Budget threshold reached",
    CAPACITY_AVAILABLE: "Capacity available (a watch matched)",
}

# The rental state a transition lands in -> the event it emits. Other states emit nothing.
STATUS_EVENTS: dict[str, str] = {
    RentalStatus.RENTED: RENTAL_RENTED,
    RentalStatus.READY: RENTAL_READY,
    RentalStatus.DEGRADED: RENTAL_DEGRADED,
    RentalStatus.CHECK_FAILED: RENTAL_CHECK_FAILED,
    RentalStatus.UNKNOWN: RENTAL_UNKNOWN,
    RentalStatus.REFUSED: RENTAL_REFUSED,
    RentalStatus.FAILED: RENTAL_FAILED,
    RentalStatus.TERMINATED: RENTAL_TERMINATED,
}

# A transition that emits an event of its own as well: a verified rental's check passed (it is also `rental.ready`).
TRANSITION_EVENTS: dict[tuple[str, str], str] = {
    (RentalStatus.VERIFYING, RentalStatus.READY): RENTAL_VERIFIED,
}


def subscribed(events: list[str], event_type: str) -> bool:
    """Return whether a subscription list (which may be ["*"]) covers `event_type`."""
    return ALL in events or event_type in events
