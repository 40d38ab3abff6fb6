"""The operations overview's attention queue: the rentals a human should look at, oldest problem first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models.expressions import RawSQL

from rentals.models import STATUS_LABELS, ClusterMember, Rental
from rentals.selectors import members_grace
from rentals.states import RentalStatus

# How long a rental may sit retrying, queued, or terminating before it shows in the attention queue.
RETRYING_ATTENTION_MINUTES = settings.OPS_RETRYING_ATTENTION_MINUTES
QUEUED_ATTENTION_MINUTES = settings.OPS_QUEUED_ATTENTION_MINUTES
TERMINATING_ATTENTION_MINUTES = settings.OPS_TERMINATING_ATTENTION_MINUTES
ATTENTION_LIMIT = 50
# What the attention table and its reasons read of a rental.
ATTENTION_FIELDS = (
    "public_id",
    "pod_name",
    "customer__name",
    "status",
    "error_code",
    "attempt_count",
    "created_at",
    "updated_at",
    "first_sent_at",
    "lease_until",
    "rented_at",
)


@dataclass(frozen=True)
class AttentionCustomer:
    name: str


@dataclass(frozen=True)
class AttentionRental:
    """What the attention table and its reasons read of a rental, as plain values: building 50 model instances
    (and the choices map of `get_status_display` per row) was a measurable part of the overview."""

    public_id: Any
    pod_name: str
    customer: AttentionCustomer
    status: str
    error_code: str
    attempt_count: int
    created_at: datetime
    updated_at: datetime
    first_sent_at: datetime | None
    lease_until: datetime | None
    rented_at: datetime | None

    @property
    def get_status_display(self) -> str:
        """The state's label, under the name the template uses for a rental's."""
        return STATUS_LABELS.get(self.status, self.status)


@dataclass(frozen=True)
class AttentionItem:
    rental: AttentionRental
    reason: str
    since: datetime | None


def attention_ids(*, now: datetime) -> RawSQL:
    """Return a subquery of the ids of the `ATTENTION_LIMIT` least recently updated rentals that need a look.

    One derived table per reason, each read in `updated_at` order off the (status, updated_at) index and cut at
    the limit, under one `UNION ALL`: an `OR` of the reasons would read every unknown and degraded rental (tens
    of thousands at a million rentals) to sort them. The rule for `rented` rentals is
    `rentals.selectors.rented_without_members`, written out here.
    """
    table = connection.ops.quote_name(Rental._meta.db_table)
    members = connection.ops.quote_name(ClusterMember._meta.db_table)
    cutoff = now - members_grace()
    reasons: list[tuple[str, list[Any]]] = [
        ("status = %s", [RentalStatus.UNKNOWN]),
        ("status = %s", [RentalStatus.DEGRADED]),
        (
            "status = %s AND first_sent_at < %s",
            [RentalStatus.RETRYING, now - timedelta(minutes=RETRYING_ATTENTION_MINUTES)],
        ),
        ("status = %s AND lease_until < %s", [RentalStatus.SENDING, now]),
        ("status = %s AND created_at < %s", [RentalStatus.QUEUED, now - timedelta(minutes=QUEUED_ATTENTION_MINUTES)]),
        (
            "status = %s AND updated_at < %s",
            [RentalStatus.TERMINATING, now - timedelta(minutes=TERMINATING_ATTENTION_MINUTES)],
        ),
        (
            f"status = %s AND (rented_at < %s OR (rented_at IS NULL AND updated_at < %s)) "  # noqa: S608 - our SQL
            f"AND NOT EXISTS (SELECT 1 FROM {members} m WHERE m.rental_id = {table}.id)",
            [RentalStatus.RENTED, cutoff, cutoff],
        ),
    ]
    adapt = connection.ops.adapt_datetimefield_value
    parts, params = [], []
    for index, (where, values) in enumerate(reasons):
        parts.append(
            f"SELECT id FROM (SELECT id FROM {table} WHERE {where} "  # noqa: S608 - our columns, values are parameters
            f"ORDER BY updated_at LIMIT {ATTENTION_LIMIT}) AS a{index}"
        )
        params += [adapt(v) if isinstance(v, datetime) else v for v in values]
    return RawSQL(" UNION ALL ".join(parts), params)  # noqa: S611 - our SQL, values are parameters


def attention_queue(*, now: datetime) -> list[AttentionItem]:
    """Return rentals a human should look at, oldest problem first, with the reason and since when (one query)."""
    items: list[AttentionItem] = []
    wanted = Rental.objects.filter(pk__in=attention_ids(now=now)).order_by("updated_at")[:ATTENTION_LIMIT]
    for row in wanted.values_list(*ATTENTION_FIELDS):
        values = dict(zip(ATTENTION_FIELDS, row, strict=True))
        values["customer"] = AttentionCustomer(values.pop("customer__name"))
        rental = AttentionRental(**values)
        if rental.status == RentalStatus.UNKNOWN:
            item = AttentionItem(rental, "Outcome unknown: reconcile", rental.updated_at)
        elif rental.status == RentalStatus.DEGRADED:
            item = AttentionItem(rental, "Degraded: a member failed", rental.updated_at)
        elif rental.status == RentalStatus.RETRYING:
            item = AttentionItem(
                rental,
                f"Retrying for more than {RETRYING_ATTENTION_MINUTES} min ({rental.attempt_count} attempts)",
                rental.first_sent_at,
            )
        elif rental.status == RentalStatus.SENDING:
            item = AttentionItem(rental, "Stuck lease: the worker's lease expired mid-attempt", rental.lease_until)
        elif rental.status == RentalStatus.RENTED:
            minutes = int(members_grace().total_seconds() // 60)
            item = AttentionItem(
                rental,
                f"Rented, but its members have not appeared within {minutes} min: reconcile",
                rental.rented_at or rental.updated_at,
            )
        elif rental.status == RentalStatus.QUEUED:
            item = AttentionItem(
                rental, f"Queued for more than {QUEUED_ATTENTION_MINUTES} min: is a worker running?", rental.created_at
            )
        else:
            item = AttentionItem(
                rental, f"Terminating for more than {TERMINATING_ATTENTION_MINUTES} min", rental.updated_at
            )
        if rental.error_code and rental.status in (RentalStatus.UNKNOWN, RentalStatus.RETRYING):
            item = AttentionItem(rental, f"{item.reason} · {rental.error_code}", item.since)
        items.append(item)
    return sorted(items, key=lambda item: item.since or now)
