"""Read the overview's sliding windows from the tallies (`ops.tallies` keeps them).

Windows: the overview counts rentals created since `now - 7 days` (and `now - 24 h`), by their state now. Whole
hours after the window's start come from the tallies (for customers: the hours up to the next midnight, then
whole days, so a page reads about a day of hour rows per customer, not a week); the part of an hour between the
window's start and the next full hour is counted from the rows, over the `created_at` index.

The statements are written out as SQL: the ORM's compile of a dozen filtered aggregates cost more than running
them.
"""

# ruff: noqa: S608 - SQL names are model tables and columns, values are parameters

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection

from accounts.models import Customer
from ops.models import AttemptTally, CustomerTally, StateTally
from ops.tallies import (
    DAY,
    HOUR,
    UNHEALTHY,
    bucket_ceil,
    bucket_floor,
    day_ceil,
    db_time,
    hour_ceil,
    latest_of,
)
from rentals.models import Rental, RentAttempt


def created_counts(*, now: datetime) -> tuple[dict[str, dict[str, int]], dict[int, dict[str, Any]]]:
    """Return rentals created since now - 24 h and now - 7 d: {status: {day, week}}, {customer id: {name, day, week}}.

    One statement of the state tallies, the customer tallies, and the rows of the two windows' first part-hours.
    """
    week_start, day_start = now - 7 * DAY, now - DAY
    week_hours, day_hours = hour_ceil(week_start), hour_ceil(day_start)
    by_state: dict[str, dict[str, int]] = {}
    by_customer: dict[int, dict[str, Any]] = {}

    def add(table: dict[Any, dict[str, Any]], key: Any, day: int, week: int, **extra: Any) -> None:
        row = table.setdefault(key, {"day": 0, "week": 0, **extra})
        row["day"] += int(day or 0)
        row["week"] += int(week or 0)

    # One statement of three parts (0: states, 1: customers, 2: the part-hour rows): one round trip, not three.
    parts = (_state_part(week_hours, day_hours), _customer_part(week_hours, day_hours), _edge_part(now))
    sql = " UNION ALL ".join(
        f"SELECT {index} AS part, status, customer_id, name, in_day, in_week FROM ({part_sql}) AS p{index}"
        for index, (part_sql, _params) in enumerate(parts)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [param for _sql, params in parts for param in params])
        for part, status, customer_id, name, day, week in cursor.fetchall():
            if part != 1:
                add(by_state, status, day, week)
            if part != 0:
                add(by_customer, customer_id, day, week, name=name)
    return by_state, by_customer


def _name(model: type[Any]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _as_datetimes(values: list[Any]) -> list[datetime | None]:
    """Aware datetimes from a raw aggregate: SQLite returns its stored text (UTC), PostgreSQL datetimes."""
    return [None if value is None else value if isinstance(value, datetime) else _parse_utc(value) for value in values]


def _parse_utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _state_part(week_hours: datetime, day_hours: datetime) -> tuple[str, list[Any]]:
    """Rentals per state from the state tallies' whole hours of each window."""
    sql = (
        # Typed NULLs: PostgreSQL makes an untyped NULL of a derived table text, which a bigint cannot join.
        f"SELECT status, CAST(NULL AS BIGINT) AS customer_id, CAST(NULL AS TEXT) AS name, "
        f"SUM(CASE WHEN hour >= %s THEN count ELSE 0 END) AS in_day, "
        f"SUM(count) AS in_week FROM {_name(StateTally)} WHERE hour >= %s GROUP BY status"
    )
    return sql, [db_time(day_hours), db_time(week_hours)]


def _customer_part(week_hours: datetime, day_hours: datetime) -> tuple[str, list[Any]]:
    """Rentals per customer from the customer tallies.

    Each window: its part-day up to the next midnight in hours, then whole days (the last one still filling).
    Three range reads of the (span, start, customer, count) index, index-only, summed per customer before the
    names are joined: one `OR` of the ranges read every tally row from the table, about a day of hours for every
    customer, scattered over the heap.
    """
    week_days, day_days = day_ceil(week_hours), day_ceil(day_hours)
    table = _name(CustomerTally)
    hour, day = CustomerTally.Span.HOUR.value, CustomerTally.Span.DAY.value
    sql = (
        f"SELECT CAST(NULL AS TEXT) AS status, t.customer_id, c.name, t.in_day, t.in_week FROM (SELECT customer_id, "
        f"SUM(in_day) AS in_day, SUM(in_week) AS in_week FROM (SELECT customer_id, 0 AS in_day, count AS in_week "
        f"FROM {table} WHERE span = %s AND start >= %s AND start < %s "
        f"UNION ALL SELECT customer_id, count, 0 FROM {table} WHERE span = %s AND start >= %s AND start < %s "
        f"UNION ALL SELECT customer_id, CASE WHEN start >= %s THEN count ELSE 0 END, count FROM {table} "
        f"WHERE span = %s AND start >= %s) AS parts GROUP BY customer_id) AS t "
        f"JOIN {_name(Customer)} c ON c.id = t.customer_id"
    )
    params = [
        *(hour, db_time(week_hours), db_time(week_days)),
        *(hour, db_time(day_hours), db_time(day_days)),
        *(db_time(day_days), day, db_time(week_days)),
    ]
    return sql, params


def _edge_part(now: datetime) -> tuple[str, list[Any]]:
    """Rentals per state and customer created in each window's first part-hour, from the rows.

    Two range reads of the `rental_created_cover` index (created_at, with state and customer), index-only, summed
    before the names are joined. An `OR` of the ranges was a bitmap scan that read one heap page per rental: up
    to two hours of rentals (about 2,700 at a million over 30 days) when the overview ran just after the hour.
    """
    week_start, day_start = now - 7 * DAY, now - DAY
    rentals = _name(Rental)
    in_range = "created_at >= %s AND created_at < %s"
    sql = (
        f"SELECT e.status, e.customer_id, c.name, e.in_day, e.in_week FROM (SELECT status, customer_id, "
        f"SUM(in_day) AS in_day, SUM(in_week) AS in_week FROM ("
        f"SELECT status, customer_id, 1 AS in_day, 0 AS in_week FROM {rentals} WHERE {in_range} "
        f"UNION ALL SELECT status, customer_id, 0, 1 FROM {rentals} WHERE {in_range}) AS r "
        f"GROUP BY status, customer_id) AS e JOIN {_name(Customer)} c ON c.id = e.customer_id"
    )
    day_edge = [db_time(day_start), db_time(hour_ceil(day_start))]
    week_edge = [db_time(week_start), db_time(hour_ceil(week_start))]
    return sql, [*day_edge, *week_edge]


LATEST_KEYS = ("last_2xx", "last_confirmed", "last_any")


def attempt_counts(*, now: datetime) -> dict[int, dict[str, Any]]:
    """Return per credential id what the overview's upstream table shows (one statement).

    From the five-minute tallies: the latest 2xx, confirmed and any attempt of the last 7 days, the 429s of the
    last 24 h, and the last hour's attempts, unhealthy ones and 429s. From the rows (the `started_at` index): the
    part-buckets between now - 1 h (and now - 24 h) and the next bucket boundary, a few minutes of attempts.
    An attempt rewritten in place (a late answer after a lease takeover, `QuerySet.update`) stays counted as it
    was first recorded until `rebuild_tallies()`; its latest times show while it is in the part-bucket.
    """
    week_start = now - 7 * DAY
    result: dict[int, dict[str, Any]] = {}

    def counts(credential_id: int) -> dict[str, Any]:
        empty = {"last_2xx": None, "last_confirmed": None, "last_any": None, "day_429": 0}
        return result.setdefault(credential_id, {**empty, "hour_total": 0, "hour_bad": 0, "hour_429": 0})

    # One statement of two parts (0: the tallies, 1: the part-buckets' rows), in the same columns.
    (tallies_sql, tallies_params), (edges_sql, edges_params) = _attempt_tallies(now), _attempt_edges(now)
    sql = f"SELECT 0 AS part, t.* FROM ({tallies_sql}) AS t UNION ALL SELECT 1, e.* FROM ({edges_sql}) AS e"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*tallies_params, *edges_params])
        rows = cursor.fetchall()
    for part, credential_id, *latest, day_429, hour_total, hour_bad, hour_429 in rows:
        row_counts = counts(credential_id)
        row_counts["day_429"] += day_429 or 0
        row_counts["hour_total"] += hour_total or 0
        row_counts["hour_bad"] += hour_bad or 0
        row_counts["hour_429"] += hour_429 or 0
        for key, value in zip(LATEST_KEYS, _as_datetimes(latest), strict=True):
            if part == 0:
                # The bucket the window starts in may hold older attempts only: a latest time before the start
                # is none.
                value = value if value is not None and value >= week_start else None
            row_counts[key] = latest_of(row_counts[key], value)
    return result


def _attempt_tallies(now: datetime) -> tuple[str, list[Any]]:
    """Per credential from the five-minute tallies: latest 2xx, confirmed, any; 429s of the day's whole
    buckets; attempts, unhealthy ones and 429s of the hour's whole buckets (the columns of `_attempt_edges`)."""
    day_buckets, hour_buckets = db_time(bucket_ceil(now - DAY)), db_time(bucket_ceil(now - HOUR))
    sql = (
        f"SELECT credential_id, MAX(last_2xx_at), MAX(last_confirmed_at), MAX(last_at), "
        f"SUM(CASE WHEN start >= %s THEN http_429 ELSE 0 END), SUM(CASE WHEN start >= %s THEN total ELSE 0 END), "
        f"SUM(CASE WHEN start >= %s THEN bad ELSE 0 END), SUM(CASE WHEN start >= %s THEN http_429 ELSE 0 END) "
        f"FROM {_name(AttemptTally)} WHERE start >= %s GROUP BY credential_id"
    )
    return sql, [day_buckets, hour_buckets, hour_buckets, hour_buckets, db_time(bucket_floor(now - 7 * DAY))]


def _attempt_edges(now: datetime) -> tuple[str, list[Any]]:
    """Per credential from the rows: the latest of each kind in the hour's part-bucket, the 429s of the day's
    part-bucket, and the hour's part-bucket attempts, unhealthy ones and 429s (the columns of `_attempt_tallies`)."""
    day_start, hour_start = now - DAY, now - HOUR
    unhealthy = ", ".join(["%s"] * len(UNHEALTHY))
    in_hour = "a.started_at >= %s AND a.started_at < %s"
    sql = (
        f"SELECT r.credential_id, "
        f"MAX(CASE WHEN {in_hour} AND a.http_status >= 200 AND a.http_status < 300 THEN a.started_at END), "
        f"MAX(CASE WHEN {in_hour} AND a.classification = %s THEN a.started_at END), "
        f"MAX(CASE WHEN {in_hour} THEN a.started_at END), "
        f"SUM(CASE WHEN a.started_at < %s AND a.http_status = 429 THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {in_hour} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {in_hour} AND a.classification IN ({unhealthy}) THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {in_hour} AND a.http_status = 429 THEN 1 ELSE 0 END) "
        f"FROM {_name(RentAttempt)} a JOIN {_name(Rental)} r ON r.id = a.rental_id "
        f"WHERE ({in_hour}) OR (a.started_at >= %s AND a.started_at < %s AND a.http_status = 429) "
        f"GROUP BY r.credential_id"
    )
    hour = [db_time(hour_start), db_time(bucket_ceil(hour_start))]
    day_buckets = db_time(bucket_ceil(day_start))
    confirmed = RentAttempt.Classification.CONFIRMED
    params = [*hour, *hour, confirmed, *hour, day_buckets, *hour, *hour, *UNHEALTHY, *hour, *hour]
    return sql, [*params, db_time(day_start), day_buckets]
