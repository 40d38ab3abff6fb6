"""Keep the overview's tallies (`ops.models`) in step with the rows, and read sliding windows from them.

Writers: a rental created (`post_save`), a state change (`rental_status_changed`, sent by the one writer of
rental state inside its transaction), a rental deleted, an attempt recorded (`post_save`). Each receiver runs in
the writer's transaction, so a rollback takes the tally change with it. Rows written around these paths (bulk
inserts, `QuerySet.update`) are not seen: `rebuild_tallies()` recounts everything from the rows (the migration
and the bench's bulk insert call it).

Windows: the overview counts rentals created since `now - 7 days` (and `now - 24 h`), by their state now. Whole
hours after the window's start come from the tallies (for customers: the hours up to the next midnight, then
whole days, so a page reads about a day of hour rows per customer, not a week); the part of an hour between the
window's start and the next full hour is counted from the rows, over the `created_at` index.
"""

# ruff: noqa: S608 - SQL names are model tables and columns, values are parameters

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Max, Q, Value
from django.db.models.functions import TruncDay, TruncHour, TruncMinute

from accounts.models import Customer
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


def _db_time(moment: datetime) -> Any:
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
    hour = _db_time(hour_floor(created_at))
    # Sorted: every transaction takes the row locks of one hour in the same order (no deadlock between two).
    changes = sorted([(from_status, -1), (to_status, 1)])
    _add(StateTally, ("hour", "status"), [(hour, status, delta) for status, delta in changes])


def count_rental(*, created_at: datetime, status: str, customer_id: int, delta: int = 1) -> None:
    """Count a rental created (delta 1) or deleted (delta -1) in its state's and its customer's tallies."""
    hour = hour_floor(created_at)
    _add(StateTally, ("hour", "status"), [(_db_time(hour), status, delta)])
    _add(
        CustomerTally,
        ("span", "start", "customer_id"),
        [
            (CustomerTally.Span.DAY, _db_time(day_floor(created_at)), customer_id, delta),
            (CustomerTally.Span.HOUR, _db_time(hour), customer_id, delta),
        ],
    )


def count_attempt(*, credential_id: int, started_at: datetime, http_status: int | None, classification: str) -> None:
    """Count one recorded attempt in its credential's five minutes: one more, unhealthy or not, a 429 or not, and
    the latest 2xx, confirmed and any."""
    name = connection.ops.quote_name(AttemptTally._meta.db_table)
    when = _db_time(started_at)
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
        _db_time(bucket_floor(started_at)),
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
        row.last_2xx_at = _latest(row.last_2xx_at, last_2xx)
        row.last_confirmed_at = _latest(row.last_confirmed_at, last_confirmed)
        row.last_at = _latest(row.last_at, last_any)
    return list(buckets.values())


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None or (b is not None and b > a) else a


def _insert_from(model: type[Any], columns: tuple[str, ...], query: Any) -> None:
    """INSERT the rows `query` selects (in `columns` order) into `model`'s table, inside the database."""
    select, params = query.query.sql_with_params()
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}) {select}", params)


# --- reading ----------------------------------------------------------------------------------------------


def created_counts(*, now: datetime) -> tuple[dict[str, dict[str, int]], dict[int, dict[str, Any]]]:
    """Return rentals created since now - 24 h and now - 7 d: {status: {day, week}}, {customer id: {name, day, week}}.

    Three queries: the state tallies, the customer tallies, and the rows of the two windows' first part-hours.
    """
    week_start, day_start = now - 7 * DAY, now - DAY
    week_hours, day_hours = hour_ceil(week_start), hour_ceil(day_start)
    by_state: dict[str, dict[str, int]] = {}
    by_customer: dict[int, dict[str, Any]] = {}

    def add(table: dict[Any, dict[str, Any]], key: Any, day: int, week: int, **extra: Any) -> None:
        row = table.setdefault(key, {"day": 0, "week": 0, **extra})
        row["day"] += int(day or 0)
        row["week"] += int(week or 0)

    # Written out, as the ORM's compile of these filtered aggregates cost more than running them.
    states_sql = (
        f"SELECT status, SUM(CASE WHEN hour >= %s THEN count ELSE 0 END), SUM(count) "
        f"FROM {_name(StateTally)} WHERE hour >= %s GROUP BY status"
    )
    in_week_edge, in_day_edge = "r.created_at >= %s AND r.created_at < %s", "r.created_at >= %s AND r.created_at < %s"
    edges_sql = (
        f"SELECT r.status, r.customer_id, c.name, SUM(CASE WHEN {in_day_edge} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {in_week_edge} THEN 1 ELSE 0 END) "
        f"FROM {_name(Rental)} r JOIN {_name(Customer)} c ON c.id = r.customer_id "
        f"WHERE ({in_week_edge}) OR ({in_day_edge}) GROUP BY r.status, r.customer_id, c.name"
    )
    week_edge, day_edge = [_db_time(week_start), _db_time(week_hours)], [_db_time(day_start), _db_time(day_hours)]
    with connection.cursor() as cursor:
        cursor.execute(states_sql, [_db_time(day_hours), _db_time(week_hours)])
        for status, day, week in cursor.fetchall():
            add(by_state, status, day, week)
        for customer_id, name, day, week in _customer_tallies(week_hours=week_hours, day_hours=day_hours):
            add(by_customer, customer_id, day, week, name=name)
        cursor.execute(edges_sql, [*day_edge, *week_edge, *week_edge, *day_edge])
        for status, customer_id, name, day, week in cursor.fetchall():
            add(by_state, status, day, week)
            add(by_customer, customer_id, day, week, name=name)
    return by_state, by_customer


def _name(model: type[Any]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _as_datetimes(values: list[Any]) -> list[datetime | None]:
    """Aware datetimes from a raw aggregate: SQLite returns its stored text (UTC), PostgreSQL datetimes."""
    return [None if value is None else value if isinstance(value, datetime) else _parse_utc(value) for value in values]


def _parse_utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _customer_tallies(*, week_hours: datetime, day_hours: datetime) -> list[tuple[int, str, int, int]]:
    """Return (customer id, name, rentals in the day window, in the week window) from the customer tallies.

    Each window: its part-day up to the next midnight in hours, then whole days (the last one still filling).
    Three range reads of the (span, start, customer, count) index, index-only, summed per customer before the
    names are joined: one `OR` of the ranges read every tally row from the table, about a day of hours for every
    customer, scattered over the heap.
    """
    week_days, day_days = day_ceil(week_hours), day_ceil(day_hours)
    table = connection.ops.quote_name(CustomerTally._meta.db_table)
    customers = connection.ops.quote_name(Customer._meta.db_table)
    hour, day = CustomerTally.Span.HOUR.value, CustomerTally.Span.DAY.value
    sql = (
        f"SELECT t.customer_id, c.name, t.in_day, t.in_week FROM (SELECT customer_id, SUM(in_day) AS in_day, "
        f"SUM(in_week) AS in_week FROM (SELECT customer_id, 0 AS in_day, count AS in_week FROM {table} "
        f"WHERE span = %s AND start >= %s AND start < %s "
        f"UNION ALL SELECT customer_id, count, 0 FROM {table} WHERE span = %s AND start >= %s AND start < %s "
        f"UNION ALL SELECT customer_id, CASE WHEN start >= %s THEN count ELSE 0 END, count FROM {table} "
        f"WHERE span = %s AND start >= %s) AS parts GROUP BY customer_id) AS t "
        f"JOIN {customers} c ON c.id = t.customer_id"
    )
    params = [
        *(hour, _db_time(week_hours), _db_time(week_days)),
        *(hour, _db_time(day_hours), _db_time(day_days)),
        *(_db_time(day_days), day, _db_time(week_days)),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, name, int(d or 0), int(w or 0)) for pk, name, d, w in cursor.fetchall()]


def attempt_counts(*, now: datetime) -> dict[int, dict[str, Any]]:
    """Return per credential id what the overview's upstream table shows (two queries).

    From the five-minute tallies: the latest 2xx, confirmed and any attempt of the last 7 days, the 429s of the
    last 24 h, and the last hour's attempts, unhealthy ones and 429s. From the rows (the `started_at` index): the
    part-buckets between now - 1 h (and now - 24 h) and the next bucket boundary, a few minutes of attempts.
    An attempt rewritten in place (a late answer after a lease takeover, `QuerySet.update`) stays counted as it
    was first recorded until `rebuild_tallies()`; its latest times show while it is in the part-bucket.
    """
    week_start, day_start, hour_start = now - 7 * DAY, now - DAY, now - HOUR
    day_buckets, hour_buckets = bucket_ceil(day_start), bucket_ceil(hour_start)
    result: dict[int, dict[str, Any]] = {}

    def counts(credential_id: int) -> dict[str, Any]:
        empty = {"last_2xx": None, "last_confirmed": None, "last_any": None, "day_429": 0}
        return result.setdefault(credential_id, {**empty, "hour_total": 0, "hour_bad": 0, "hour_429": 0})

    adapt = _db_time
    tallies_sql = (
        f"SELECT credential_id, MAX(last_2xx_at), MAX(last_confirmed_at), MAX(last_at), "
        f"SUM(CASE WHEN start >= %s THEN http_429 ELSE 0 END), SUM(CASE WHEN start >= %s THEN total ELSE 0 END), "
        f"SUM(CASE WHEN start >= %s THEN bad ELSE 0 END), SUM(CASE WHEN start >= %s THEN http_429 ELSE 0 END) "
        f"FROM {_name(AttemptTally)} WHERE start >= %s GROUP BY credential_id"
    )
    tallies_params = [adapt(day_buckets), *[adapt(hour_buckets)] * 3, adapt(bucket_floor(week_start))]
    # Written out, as the ORM's compile of these filtered aggregates cost more than running them.
    unhealthy = ", ".join(["%s"] * len(UNHEALTHY))
    in_hour_edge = "a.started_at >= %s AND a.started_at < %s"
    edge_sql = (
        f"SELECT r.credential_id, "
        f"SUM(CASE WHEN {in_hour_edge} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {in_hour_edge} AND a.classification IN ({unhealthy}) THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {in_hour_edge} AND a.http_status = 429 THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN a.started_at < %s AND a.http_status = 429 THEN 1 ELSE 0 END), "
        f"MAX(CASE WHEN {in_hour_edge} AND a.http_status >= 200 AND a.http_status < 300 THEN a.started_at END), "
        f"MAX(CASE WHEN {in_hour_edge} AND a.classification = %s THEN a.started_at END), "
        f"MAX(CASE WHEN {in_hour_edge} THEN a.started_at END) "
        f"FROM {_name(RentAttempt)} a JOIN {_name(Rental)} r ON r.id = a.rental_id "
        f"WHERE ({in_hour_edge}) OR (a.started_at >= %s AND a.started_at < %s AND a.http_status = 429) "
        f"GROUP BY r.credential_id"
    )
    hour_edge = [adapt(hour_start), adapt(hour_buckets)]
    edge_params = [
        *hour_edge,
        *hour_edge,
        *UNHEALTHY,
        *hour_edge,
        adapt(day_buckets),
        *hour_edge,
        *hour_edge,
        RentAttempt.Classification.CONFIRMED,
        *hour_edge,
        *hour_edge,
        adapt(day_start),
        adapt(day_buckets),
    ]
    latest_keys = ("last_2xx", "last_confirmed", "last_any")
    with connection.cursor() as cursor:
        cursor.execute(tallies_sql, tallies_params)
        for credential_id, *latest, day_429, hour_total, hour_bad, hour_429 in cursor.fetchall():
            row_counts = counts(credential_id)
            row_counts.update(day_429=day_429 or 0, hour_total=hour_total or 0, hour_bad=hour_bad or 0)
            row_counts["hour_429"] = hour_429 or 0
            for key, value in zip(latest_keys, _as_datetimes(latest), strict=True):
                # The bucket the window starts in may hold older attempts only: a latest time before the start
                # is none.
                row_counts[key] = value if value is not None and value >= week_start else None
        cursor.execute(edge_sql, edge_params)
        for credential_id, hour_total, hour_bad, hour_429, edge_429, *latest in cursor.fetchall():
            row_counts = counts(credential_id)
            row_counts["hour_total"] += hour_total or 0
            row_counts["hour_bad"] += hour_bad or 0
            row_counts["hour_429"] += hour_429 or 0
            row_counts["day_429"] += edge_429 or 0
            for key, value in zip(latest_keys, _as_datetimes(latest), strict=True):
                row_counts[key] = _latest(row_counts[key], value)
    return result
