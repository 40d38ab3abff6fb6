"""Rent calls in flight: a cap per credential and a global cap, held in the database, shared fairly.

The in-flight set is the rentals in `sending` whose lease is still valid: the row is the truth, so the caps
hold across worker processes and machines. Every claim asks `admit` inside its transaction, after the
admissions are serialized (PostgreSQL: the slots row is locked `FOR UPDATE` until the claim commits; SQLite:
the claim's transaction is IMMEDIATE, so it already holds the database's only write lock). A rental refused
a slot stays where it was, marked as waiting for one (a `queued` row gets `next_attempt_at`); whenever an
attempt finishes, and on every sweep, `dispatch` enqueues the next fair waiting rentals for the free slots.

Fair: when the cap binds, the next rental sent for a credential is the waiting one whose customer has the
fewest calls in flight, then the oldest. One customer's burst therefore holds another customer's single
rental back by at most one call's latency: the first slot that frees is that rental's.

This module imports neither the engine nor the tasks (only `rentals.enqueue`), so both can call it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, Min, Q
from django.utils import timezone

from rentals.enqueue import rental_send_enqueue
from rentals.models import Heartbeat, Rental
from rentals.states import RentalStatus

SLOTS_ROW = "rent-slots"
# A retrying rental's own delayed message normally claims it at `next_attempt_at`: only one still waiting
# this long after that was refused a slot (or lost its message), and the dispatcher may send it.
RETRY_MESSAGE_GRACE = timedelta(seconds=2)


def in_flight(now: datetime) -> Q:
    """Return the rentals holding a rent slot: `sending` with a lease that has not expired."""
    return Q(status=RentalStatus.SENDING, lease_until__gte=now)


def waiting(now: datetime) -> Q:
    """Return the rentals that want a slot now: queued, or a retry that is due."""
    return Q(status=RentalStatus.QUEUED) | Q(status=RentalStatus.RETRYING, next_attempt_at__lte=now)


def refused_a_slot(now: datetime) -> Q:
    """Return the waiting rentals that have no message on the broker: refused a slot, so only a dispatch
    (or the sweeper) sends them."""
    return Q(status=RentalStatus.QUEUED, next_attempt_at__isnull=False) | Q(
        status=RentalStatus.RETRYING, next_attempt_at__lte=now - RETRY_MESSAGE_GRACE
    )


def admit(rental: Rental, *, now: datetime) -> bool:
    """Inside the claim's transaction: return whether the rental may take a rent slot now.

    Refused, a queued rental is marked as waiting for a slot (in the same transaction).
    """
    _lock_slots(now)
    usage = _usage(now)
    load = usage.by_customer(rental.credential_id)
    free = min(
        settings.RENT_INFLIGHT_GLOBAL - usage.total,
        settings.RENT_INFLIGHT_PER_CREDENTIAL - sum(load.values()),
    )
    admitted = free > 0 and _ahead_of(rental, load, now, limit=free) < free
    if not admitted and rental.status == RentalStatus.QUEUED:
        Rental.objects.filter(pk=rental.pk, status=RentalStatus.QUEUED, next_attempt_at__isnull=True).update(
            next_attempt_at=now
        )
    return admitted


@dataclass(frozen=True)
class Usage:
    """Rent calls in flight, per (credential, customer), read in one query."""

    counts: dict[tuple[int, int], int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_customer(self, credential_id: int) -> Counter[int]:
        return Counter(
            {customer: n for (credential, customer), n in self.counts.items() if credential == credential_id}
        )


def _usage(now: datetime) -> Usage:
    rows = (
        Rental.objects.filter(in_flight(now))
        .order_by()
        .values_list("credential_id", "customer_id")
        .annotate(n=Count("id"))
    )
    return Usage({(credential, customer): n for credential, customer, n in rows})


def dispatch(*, now: datetime | None = None) -> list[int]:
    """Enqueue the next fair waiting rentals for the free slots of every credential; return their ids.

    Each is taken with a conditional UPDATE, so two dispatchers running at once never send the same rental.
    """
    now = now or timezone.now()
    credential_ids = sorted(
        set(Rental.objects.filter(refused_a_slot(now)).order_by().values_list("credential_id", flat=True))
    )
    if not credential_ids:
        return []
    usage = _usage(now)
    global_free = settings.RENT_INFLIGHT_GLOBAL - usage.total
    sent: list[int] = []
    for credential_id in credential_ids:
        if global_free <= 0:
            break
        used = sum(usage.by_customer(credential_id).values())
        free = min(global_free, settings.RENT_INFLIGHT_PER_CREDENTIAL - used)
        for rental in fair_order(credential_id, now, limit=free):
            if _take_for_dispatch(rental, now):
                rental_send_enqueue(rental.pk)
                sent.append(rental.pk)
                global_free -= 1
    return sent


def fair_order(credential_id: int, now: datetime, *, limit: int) -> list[Rental]:
    """Return up to `limit` rentals refused a slot, in the order slots go to them: each next one belongs to
    the customer with the fewest calls in flight (counting the ones chosen before it), then is the oldest."""
    if limit <= 0:
        return []
    load = _usage(now).by_customer(credential_id)
    refused = Rental.objects.filter(refused_a_slot(now), credential_id=credential_id)
    # Each waiting customer's oldest rental: one grouped query, however many rentals a customer has queued.
    heads = dict(
        refused.order_by().values("customer_id").annotate(oldest=Min("created_at")).values_list("customer_id", "oldest")
    )
    queues: dict[int, list[Rental]] = {}
    chosen: list[Rental] = []
    while len(chosen) < limit and heads:
        customer = min(heads, key=lambda c: (load[c], heads[c], c))
        if customer not in queues:
            queues[customer] = list(
                refused.filter(customer_id=customer)
                .only("pk", "customer_id", "status", "next_attempt_at", "created_at")
                .order_by("created_at", "pk")[:limit]
            )
        queue = queues[customer]
        if not queue:  # taken by another dispatcher since the grouped read
            del heads[customer]
            continue
        chosen.append(queue.pop(0))
        load[customer] += 1
        if queue:
            heads[customer] = queue[0].created_at
        else:
            del heads[customer]
    return chosen


def _take_for_dispatch(rental: Rental, now: datetime) -> bool:
    """Clear the rental's waiting mark, if it is still as read; return whether this dispatcher took it."""
    taken = Rental.objects.filter(pk=rental.pk, status=rental.status, next_attempt_at=rental.next_attempt_at)
    if rental.status == RentalStatus.QUEUED:
        # Queued again with a fresh message: the sweeper's lost-message clock (`updated_at`) starts over.
        return taken.update(next_attempt_at=None, updated_at=now) == 1
    return taken.update(next_attempt_at=now) == 1  # still due; a later dispatch waits RETRY_MESSAGE_GRACE first


def _lock_slots(now: datetime) -> None:
    """Serialize admissions until the transaction ends (SQLite's IMMEDIATE transactions already are)."""
    if connection.vendor == "sqlite":
        return
    if Heartbeat.objects.select_for_update().filter(name=SLOTS_ROW).exists():
        return
    Heartbeat.objects.get_or_create(name=SLOTS_ROW, defaults={"at": now})
    Heartbeat.objects.select_for_update().filter(name=SLOTS_ROW).exists()


def _ahead_of(rental: Rental, load: Counter[int], now: datetime, *, limit: int) -> int:
    """Count (up to `limit`) the waiting rentals of other customers of the credential that come before this one:
    their customer has fewer calls in flight, or as many and the rental is older.

    The rental's own customer's others are not counted: which of one customer's rentals takes a slot is not a
    question of fairness (the dispatcher sends the oldest first), and counting them would refuse the back of a
    long backlog while slots are free.
    """
    mine = load[rental.customer_id]
    older = Q(created_at__lt=rental.created_at) | Q(created_at=rental.created_at, pk__lt=rental.pk)
    if mine == 0:
        before = older & ~Q(customer_id__in=list(load))
    else:
        fewer = ~Q(customer_id__in=[c for c, n in load.items() if n >= mine])
        before = fewer | (Q(customer_id__in=[c for c, n in load.items() if n == mine]) & older)
    ahead = (
        Rental.objects.filter(waiting(now), before, credential_id=rental.credential_id)
        .exclude(customer_id=rental.customer_id)
        .order_by()
    )
    return ahead[:limit].count()
