"""Keep the overview's tallies (`ops.models`) in step with the rows, and recount them from the rows.

Writers: a rental created (`post_save`), a state change (`rental_status_changed`, sent by the one writer of
rental state inside its transaction), a rental deleted, an attempt recorded (`post_save`). Each receiver runs in
the writer's transaction, so a rollback takes the tally change with it. Rows written around these paths (bulk
inserts, `QuerySet.update`) are not seen: `rebuild_tallies()` recounts everything from the rows (the migration
and the bench's bulk insert call it).

The windows the overview reads from them: `ops.tally_windows`.
"""

# ruff: noqa: S608 - SQL names are model tables and columns, values are parameters

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Max, Q, Value
from django.db.models.functions import TruncDay, TruncHour, TruncMinute

from ops.models import AttemptTally, CustomerTally, StateTally
from rentals.models import Rental, RentAttempt

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
ATTEMPT_BUCKET_MINUTES = 5
OK_2XX = Q(http_status__gte=200, http_status__lt=300)
UNHEALTHY = (RentAttempt.Classification.INCONCLUSIVE, RentAttempt.Classification.NEVER_SENT)


def hour_floor(moment: datetime) -> datetime:
    """Return the start of the UTC hour `moment` falls in."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_ceil(moment: datetime) -> datetime:
    """Return the first UTC hour boundary at or after `moment`."""
    floor = hour_floor(moment)
    return floor if floor == moment else floor + HOUR


def bucket_floor(moment: datetime) -> datetime:
    """Return the start of the UTC five-minute attempt bucket `moment` falls in."""
    moment = moment.astimezone(UTC).replace(second=0, microsecond=0)
    return moment.replace(minute=moment.minute - moment.minute % ATTEMPT_BUCKET_MINUTES)


def bucket_ceil(moment: datetime) -> datetime:
    """Return the first attempt bucket boundary at or after `moment`."""
    floor = bucket_floor(moment)
    return floor if floor == moment else floor + timedelta(minutes=ATTEMPT_BUCKET_MINUTES)


def day_floor(moment: datetime) -> datetime:
    """Return the start of the UTC day `moment` falls in."""
    return hour_floor(moment).replace(hour=0)


def day_ceil(moment: datetime) -> datetime:
    """Return the first UTC midnight at or after `moment`."""
    floor = day_floor(moment)
    return floor if floor == moment else floor + DAY


# --- writing ----------------------------------------------------------------------------------------------


def db_time(moment: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(moment)


def _add(table: type[Any], keys: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> None:
    """Add each row's last value to the `count` of the tally row its other values name (created at 0)."""
    rows = list(rows)
    name = connection.ops.quote_name(table._meta.db_table)
    columns = ", ".join((*keys, "count"))
    marks = ", ".join("(" + ", ".join(["%s"] * (len(keys) + 1)) + ")" for _ in rows)
    sql = (
        f"INSERT INTO {name} ({columns}) VALUES {marks} "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET count = {name}.count + excluded.count"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])


def count_state_change(*, created_at: datetime, from_status: str, to_status: str) -> None:
    """Move one rental created at `created_at` from one state's tally to another's."""
    if from_status == to_status:
        return  # sending -> sending (a lease taken over): nothing moves, and one upsert may not touch a row twice
    hour = db_time(hour_floor(created_at))
    # Sorted: every transaction takes the row locks of one hour in the same order (no deadlock between two).
    changes = sorted([(from_status, -1), (to_status, 1)])
    _add(StateTally, ("hour", "status"), [(hour, status, delta) for status, delta in changes])


def count_rental(*, created_at: datetime, status: str, customer_id: int, delta: int = 1) -> None:
    """Count a rental created (delta 1) or deleted (delta -1) in its state's and its customer's tallies."""
    hour = hour_floor(created_at)
    _add(StateTally, ("hour", "status"), [(db_time(hour), status, delta)])
    _add(
        CustomerTally,
        ("span", "start", "customer_id"),
        [
            (CustomerTally.Span.DAY, db_time(day_floor(created_at)), customer_id, delta),
            (CustomerTally.Span.HOUR, db_time(hour), customer_id, delta),
        ],
    )


def count_attempt(*, credential_id: int, started_at: datetime, http_status: int | None, classification: str) -> None:
    """Count one recorded attempt in its credential's five minutes: one more, unhealthy or not, a 429 or not, and
    the latest 2xx, confirmed and any."""
    name = connection.ops.quote_name(AttemptTally._meta.db_table)
    when = db_time(started_at)
    is_2xx = http_status is not None and 200 <= http_status < 300
    confirmed = classification == RentAttempt.Classification.CONFIRMED

    def later(column: str) -> str:
        # Portable GREATEST that ignores NULLs (SQLite's two-argument MAX returns NULL when either is NULL).
        return (
            f"{column} = CASE WHEN excluded.{column} IS NULL THEN {name}.{column} "
            f"WHEN {name}.{column} IS NULL OR excluded.{column} > {name}.{column} THEN excluded.{column} "
            f"ELSE {name}.{column} END"
        )

    sql = (
        f"INSERT INTO {name} (start, credential_id, total, bad, http_429, last_2xx_at, last_confirmed_at, last_at) "
        f"VALUES (%s, %s, 1, %s, %s, %s, %s, %s) ON CONFLICT (start, credential_id) DO UPDATE SET "
        f"total = {name}.total + 1, bad = {name}.bad + excluded.bad, http_429 = {name}.http_429 + excluded.http_429, "
        f"{later('last_2xx_at')}, {later('last_confirmed_at')}, {later('last_at')}"
    )
    params = [
        db_time(bucket_floor(started_at)),
        credential_id,
        1 if classification in UNHEALTHY else 0,
        1 if http_status == 429 else 0,
        when if is_2xx else None,
        when if confirmed else None,
        when,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def on_rental_saved(*, instance: Rental, created: bool, raw: bool = False, **_kwargs: Any) -> None:
    """post_save of a rental: count a new one (a state change goes through `rental_status_changed`)."""
    if created and not raw:
        count_rental(created_at=instance.created_at, status=instance.status, customer_id=instance.customer_id)


def on_rental_deleted(*, instance: Rental, **_kwargs: Any) -> None:
    """post_delete of a rental: take it out of its tallies."""
    count_rental(created_at=instance.created_at, status=instance.status, customer_id=instance.customer_id, delta=-1)


def on_rental_status_changed(*, rental_id: int, from_status: str, to_status: str, **_kwargs: Any) -> None:
    """rental_status_changed: move the rental between its creation hour's state tallies."""
    created_at = Rental.objects.filter(pk=rental_id).values_list("created_at", flat=True).first()
    if created_at is not None:
        count_state_change(created_at=created_at, from_status=from_status, to_status=to_status)


def on_attempt_saved(*, instance: RentAttempt, created: bool, raw: bool = False, **_kwargs: Any) -> None:
    """post_save of an attempt: count it for its rental's credential."""
    if not created or raw:
        return
    credential_id = Rental.objects.filter(pk=instance.rental_id).values_list("credential_id", flat=True).first()
    if credential_id is not None:
        count_attempt(
            credential_id=credential_id,
            started_at=instance.started_at,
            http_status=instance.http_status,
            classification=instance.classification,
        )


def rebuild_tallies(models: dict[str, Any] | None = None) -> None:
    """Recount every tally from the rows, in one transaction (after a bulk insert, or to repair drift).

    `models` maps model names to classes (a migration passes its historical ones); default: the live ones.
    """
    m = models or {
        "Rental": Rental,
        "RentAttempt": RentAttempt,
        "StateTally": StateTally,
        "CustomerTally": CustomerTally,
        "AttemptTally": AttemptTally,
    }
    rentals = m["Rental"].objects.order_by()
    hour = TruncHour("created_at", tzinfo=UTC)
    states = rentals.values(h=hour, s=F("status")).annotate(n=Count("id")).values_list("h", "s", "n")
    per_customer = [
        rentals.values(p=Value(span.value), t=trunc("created_at", tzinfo=UTC), c=F("customer_id"))
        .annotate(n=Count("id"))
        .values_list("p", "t", "c", "n")
        for span, trunc in ((CustomerTally.Span.HOUR, TruncHour), (CustomerTally.Span.DAY, TruncDay))
    ]
    with transaction.atomic():
        for table in ("StateTally", "CustomerTally", "AttemptTally"):
            if table in m:
                m[table].objects.all().delete()
        _insert_from(m["StateTally"], ("hour", "status", "count"), states)
        for query in per_customer:
            _insert_from(m["CustomerTally"], ("span", "start", "customer_id", "count"), query)
        if "AttemptTally" in m:
            m["AttemptTally"].objects.bulk_create(_attempt_buckets(m), batch_size=2000)


def _attempt_buckets(m: dict[str, Any]) -> list[Any]:
    """Return the attempt tallies counted from the rows: per minute in the database, summed into buckets here
    (a five-minute truncation has no portable SQL; a week of minutes is ten thousand rows per credential)."""
    per_minute = (
        m["RentAttempt"]
        .objects.order_by()
        .values(t=TruncMinute("started_at", tzinfo=UTC), c=F("rental__credential_id"))
        .annotate(
            n=Count("id"),
            bad=Count("id", filter=Q(classification__in=UNHEALTHY)),
            n429=Count("id", filter=Q(http_status=429)),
            l2xx=Max("started_at", filter=OK_2XX),
            lc=Max("started_at", filter=Q(classification=RentAttempt.Classification.CONFIRMED)),
            la=Max("started_at"),
        )
        .values_list("t", "c", "n", "bad", "n429", "l2xx", "lc", "la")
    )
    buckets: dict[tuple[datetime, int], Any] = {}
    for minute, credential_id, total, bad, n429, last_2xx, last_confirmed, last_any in per_minute:
        key = (bucket_floor(minute), credential_id)
        row = buckets.get(key)
        if row is None:
            row = buckets[key] = m["AttemptTally"](start=key[0], credential_id=credential_id)
        row.total += total
        row.bad += bad
        row.http_429 += n429
        row.last_2xx_at = latest_of(row.last_2xx_at, last_2xx)
        row.last_confirmed_at = latest_of(row.last_confirmed_at, last_confirmed)
        row.last_at = latest_of(row.last_at, last_any)
    return list(buckets.values())


def latest_of(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None or (b is not None and b > a) else a


def _insert_from(model: type[Any], columns: tuple[str, ...], query: Any) -> None:
    """INSERT the rows `query` selects (in `columns` order) into `model`'s table, inside the database."""
    select, params = query.query.sql_with_params()
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}) {select}", params)
