"""Rental states and the transitions between them: the one place that says what may follow what.

queued ──claim──▶ sending ──2xx success──────────────▶ rented ──all members RUNNING──▶ ready
  │                 │  ├─ definite refusal ─────────▶ refused         │                  │
cancel              │  ├─ inconclusive ──▶ retrying ─┘(due: claim)    ├─ member failed ─▶ degraded
  ▼                 │  └─ outcome unknown / key reused / window over ─▶ unknown ──reconcile──▶ rented | not_rented
cancelled           └─ never reached the server (all attempts) ─────▶ failed
ready/degraded/rented ─terminate▶ terminating ─▶ terminated
rented ──all RUNNING, verify_fabric──▶ verifying ──check passed──▶ ready
                                          └─ under the floor / could not measure ─▶ check_failed ──keep──▶ ready
sending ──lease expired, taken over──▶ sending;  unknown ──one cluster only it can claim (automatic look)──▶ rented
scheduled ──its start time (beat), nodes free, budget and quotas still allow──▶ queued
    ├─ nodes gone / budget or quota refuses at its time ─▶ refused
    └─ cancel ─▶ cancelled                       (edited: only its start time, while scheduled)
"""

from django.db import models


class RentalStatus(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    QUEUED = "queued", "Queued"
    SENDING = "sending", "Sending"
    RETRYING = "retrying", "Retrying"
    RENTED = "rented", "Rented, nodes starting"
    VERIFYING = "verifying", "Verifying the fabric"
    CHECK_FAILED = "check_failed", "Fabric check failed"
    READY = "ready", "Ready"
    DEGRADED = "degraded", "Degraded"
    REFUSED = "refused", "Refused"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Outcome unknown"
    NOT_RENTED = "not_rented", "Not rented"
    CANCELLED = "cancelled", "Cancelled"
    TERMINATING = "terminating", "Terminating"
    TERMINATED = "terminated", "Terminated"


S = RentalStatus

FINAL_STATES = frozenset({S.REFUSED, S.FAILED, S.NOT_RENTED, S.CANCELLED, S.TERMINATED})
# States whose rental bills nothing and counts in no quota: the final ones, and a scheduled one until its time.
NOT_ACTIVE_STATES = FINAL_STATES | {S.SCHEDULED}
# States in which the upstream may hold a cluster of ours (members are tracked, it can be terminated).
HOLDS_CLUSTER_STATES = frozenset({S.RENTED, S.VERIFYING, S.CHECK_FAILED, S.READY, S.DEGRADED})
# States in which an order may have created a cluster it does not hold yet (reconciliation's rivals, indexed).
UNSETTLED_STATES = (
    S.QUEUED,
    S.SENDING,
    S.RETRYING,
    S.UNKNOWN,
    S.RENTED,
    S.VERIFYING,
    S.CHECK_FAILED,
    S.READY,
    S.DEGRADED,
)
# States in which a rental may need a human (the ops overview's attention queue, indexed).
ATTENTION_STATES = (S.UNKNOWN, S.DEGRADED, S.RETRYING, S.SENDING, S.QUEUED, S.TERMINATING, S.RENTED, S.VERIFYING)
# States whose page keeps changing by itself (the poller or the worker moves them on).
IN_FLIGHT_STATES = frozenset({S.QUEUED, S.SENDING, S.RETRYING, S.RENTED, S.VERIFYING, S.TERMINATING})

TRANSITIONS: dict[str, frozenset[str]] = {
    # At its time: sent (queued), or refused (its nodes are gone, or a budget or quota no longer allows it).
    S.SCHEDULED: frozenset({S.QUEUED, S.CANCELLED, S.REFUSED}),
    # queued → refused: Lium's cluster switch stayed off past LIUM_SWITCH_MAX_WAIT_SECONDS; nothing was sent.
    S.QUEUED: frozenset({S.SENDING, S.CANCELLED, S.REFUSED}),
    # sending → sending: a worker takes over the expired lease of one that died mid-attempt.
    S.SENDING: frozenset({S.SENDING, S.RENTED, S.REFUSED, S.RETRYING, S.UNKNOWN, S.FAILED}),
    # A retrying rental whose window ran out is settled by the sweeper without another send.
    S.RETRYING: frozenset({S.SENDING, S.UNKNOWN, S.FAILED}),
    S.RENTED: frozenset({S.READY, S.VERIFYING, S.DEGRADED, S.TERMINATING}),
    # The check passed (ready) or did not (check_failed); a member failing meanwhile wins (degraded).
    S.VERIFYING: frozenset({S.READY, S.CHECK_FAILED, S.DEGRADED, S.TERMINATING}),
    # The customer keeps the cluster unverified (ready), or terminates it (and may rent again without the slow node).
    S.CHECK_FAILED: frozenset({S.READY, S.DEGRADED, S.TERMINATING}),
    S.READY: frozenset({S.DEGRADED, S.TERMINATING}),
    S.DEGRADED: frozenset({S.READY, S.TERMINATING}),
    # Operators may replay the stored request inside the window (-> retrying, then a worker claims it),
    # or confirm what reconciliation found.
    S.UNKNOWN: frozenset({S.SENDING, S.RETRYING, S.RENTED, S.NOT_RENTED}),
    # A refused delete: back to what the members (and a verified rental's check) show.
    S.TERMINATING: frozenset({S.TERMINATED, S.READY, S.DEGRADED, S.CHECK_FAILED}),
    S.REFUSED: frozenset(),
    S.FAILED: frozenset(),
    S.NOT_RENTED: frozenset(),
    S.CANCELLED: frozenset(),
    S.TERMINATED: frozenset(),
}


def can_transition(current: str, new: str) -> bool:
    """Return whether a rental may move from `current` to `new`."""
    return new in TRANSITIONS.get(current, frozenset())


# What a customer reads for each state: plain words, no jargon.
CUSTOMER_EXPLANATIONS: dict[str, str] = {
    S.SCHEDULED: (
        "Your order is saved for a later start. At its time we check that its nodes are still free and that "
        "your budget and quotas allow it, then send it. Until then you can change its time or cancel it."
    ),
    S.QUEUED: "Your order is saved and waiting for a worker to send it.",
    S.SENDING: "Your order is being sent to Lium.",
    S.RETRYING: "Lium did not answer clearly; we will send the same order again (it can never rent twice).",
    S.RENTED: "Lium confirmed the cluster. The nodes are starting.",
    S.VERIFYING: "Every node is running. We are measuring the fabric's bandwidth before handing the cluster over.",
    S.CHECK_FAILED: (
        "The fabric check did not pass: the cluster runs and bills, but is slower than its fabric promises. "
        "Keep it as it is, or terminate it and rent again without the slow node."
    ),
    S.READY: "Every node is running and reachable over SSH.",
    S.DEGRADED: "At least one node failed. The other nodes keep running and billing.",
    S.REFUSED: "Lium refused the order. Nothing was rented and nothing is billed.",
    S.FAILED: "Nothing was rented: the Lium API could not be reached.",
    S.UNKNOWN: (
        "We cannot tell yet whether the cluster was rented. Do not rent again: support is checking "
        "whether the cluster exists."
    ),
    S.NOT_RENTED: "Support confirmed that no cluster was rented for this order. Nothing is billed.",
    S.CANCELLED: "The order was cancelled before it was sent. Nothing was rented.",
    S.TERMINATING: "The cluster is being removed.",
    S.TERMINATED: "The cluster was removed.",
}
