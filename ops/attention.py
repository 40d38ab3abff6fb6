"""The operations overview's attention queue: the rentals a human should look at, oldest problem first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection

from accounts.models import Customer
from ops.durations import duration_text
from ops.links import rental_page_links
from ops.raw_rows import converted
from rentals.models import STATUS_LABELS, ClusterMember, Rental
from rentals.selectors import members_grace
from rentals.states import RentalStatus

# How long a rental may sit retrying, queued, or terminating before it shows in the attention queue.
RETRYING_ATTENTION_MINUTES = settings.OPS_RETRYING_ATTENTION_MINUTES
QUEUED_ATTENTION_MINUTES = settings.OPS_QUEUED_ATTENTION_MINUTES
TERMINATING_ATTENTION_MINUTES = settings.OPS_TERMINATING_ATTENTION_MINUTES
ATTENTION_LIMIT = 50


class _Row(NamedTuple):
    """A rental as the queue reads it (its columns, and its customer's name): plain values, no model instance."""

    public_id: Any
    pod_name: str
    customer_name: str
    status: str
    error_code: str
    attempt_count: int
    created_at: datetime
    updated_at: datetime
    first_sent_at: datetime | None
    lease_until: datetime | None
    rented_at: datetime | None


@dataclass(frozen=True)
class AttentionItem:
    """One row of the attention table, every cell ready to print.

    At a million rentals the template's per-row `{% url %}`, state label and `timesince` filter were most of the
    overview's template time (about 15 of 19 ms of CPU for 50 rows on a loaded 2-core machine); here, under 1 ms.
    """

    url: str  # the rental's staff page
    pod_name: str
    customer_name: str
    status: str
    status_label: str
    reason: str
    since: datetime | None
    since_text: str  # how long, "2 h 05 min" (`ops.durations`), or "—"


def attention_sql(*, now: datetime) -> tuple[str, list[Any]]:
    """Return the statement of the `ATTENTION_LIMIT` least recently updated rentals that need a look, as `_Row`s.

    One derived table per reason, each read in `updated_at` order off the (status, updated_at) index and cut at
    the limit, under one `UNION ALL`: an `OR` of the reasons would read every unknown and degraded rental (tens
    of thousands at a million rentals) to sort them. Each reads the row's columns itself: selecting ids to read
    the rows again by primary key (through the ORM) cost 1 ms more to run at a million rentals, and its compile
    about as much. The rule for `rented` rentals is `rentals.selectors.rented_without_members`, written out here.
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
    columns = ", ".join(("customer_id", *(name for name in _Row._fields if name != "customer_name")))
    parts, params = [], []
    for index, (where, values) in enumerate(reasons):
        parts.append(
            f"SELECT * FROM (SELECT {columns} FROM {table} WHERE {where} "  # noqa: S608 - our columns, values are parameters
            f"ORDER BY updated_at LIMIT {ATTENTION_LIMIT}) AS a{index}"
        )
        params += [adapt(v) if isinstance(v, datetime) else v for v in values]
    customers = connection.ops.quote_name(Customer._meta.db_table)
    picked = ", ".join("c.name" if name == "customer_name" else f"a.{name}" for name in _Row._fields)
    sql = (
        f"SELECT {picked} FROM ({' UNION ALL '.join(parts)}) AS a "  # noqa: S608 - as above
        f"JOIN {customers} c ON c.id = a.customer_id ORDER BY a.updated_at LIMIT {ATTENTION_LIMIT}"
    )
    return sql, params


def attention_queue(*, now: datetime) -> list[AttentionItem]:
    """Return rentals a human should look at, oldest problem first, with the reason and since when (one query)."""
    sql, params = attention_sql(now=now)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    columns = {index: name for index, name in enumerate(_Row._fields) if name != "customer_name"}
    rows = [_Row(*values) for values in converted(fetched, Rental, columns)]
    link = rental_page_links()
    items = []
    for row in rows:
        reason, since = _reason(row)
        items.append(
            AttentionItem(
                url=link(row.public_id),
                pod_name=row.pod_name,
                customer_name=row.customer_name,
                status=row.status,
                status_label=STATUS_LABELS.get(row.status, row.status),
                reason=reason,
                since=since,
                since_text=duration_text(now - since) if since else "—",
            )
        )
    return sorted(items, key=lambda item: item.since or now)


def _reason(row: _Row) -> tuple[str, datetime | None]:
    """Return why the rental is listed and since when."""
    since: datetime | None
    if row.status == RentalStatus.UNKNOWN:
        reason, since = "Outcome unknown: reconcile", row.updated_at
    elif row.status == RentalStatus.DEGRADED:
        reason, since = "Degraded: a member failed", row.updated_at
    elif row.status == RentalStatus.RETRYING:
        reason = f"Retrying for more than {RETRYING_ATTENTION_MINUTES} min ({row.attempt_count} attempts)"
        since = row.first_sent_at
    elif row.status == RentalStatus.SENDING:
        reason, since = "Stuck lease: the worker's lease expired mid-attempt", row.lease_until
    elif row.status == RentalStatus.RENTED:
        minutes = int(members_grace().total_seconds() // 60)
        reason = f"Rented, but its members have not appeared within {minutes} min: reconcile"
        since = row.rented_at or row.updated_at
    elif row.status == RentalStatus.QUEUED:
        reason, since = f"Queued for more than {QUEUED_ATTENTION_MINUTES} min: is a worker running?", row.created_at
    else:
        reason, since = f"Terminating for more than {TERMINATING_ATTENTION_MINUTES} min", row.updated_at
    if row.error_code and row.status in (RentalStatus.UNKNOWN, RentalStatus.RETRYING):
        reason = f"{reason} · {row.error_code}"
    return reason, since
