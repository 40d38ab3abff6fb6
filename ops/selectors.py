"""Reads for staff pages: the overview, a rental's timeline, usage and the audit log (the search: `ops.search`).

Every function runs a fixed number of queries, whatever the number of rows: aggregates, `select_related`
and bounded lookups on indexed columns only (the search must stay fast at a million rentals).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest, Least
from django.utils import timezone

from accounts.models import SupportRead, UpstreamCredential
from ops.attention import attention_queue
from ops.tally_windows import attempt_counts, created_counts
from rentals.models import ClusterMember, Heartbeat, Rental, RentalEvent, RentAttempt
from rentals.outcomes import MAX_RETRY_WINDOW, retry_deadline
from rentals.states import RentalStatus

SWEEPER_HEARTBEAT = "sweeper"
UPSTREAM_KEY_WINDOW = timedelta(hours=24)


# --- overview ---------------------------------------------------------------------------------------------


def rental_counts(*, now: datetime) -> dict[str, Any]:
    """Return rentals created in the last 24 h and 7 d, by state and by customer (from `ops.tally_windows`)."""
    states, customers = created_counts(now=now)
    labels = dict(RentalStatus.choices)
    by_state = [
        {"status": status, "label": labels.get(status, status), "day": row["day"], "week": row["week"]}
        for status, row in sorted(states.items())
        if row["week"]
    ]
    by_customer = sorted(
        (
            {"customer_id": pk, "customer__name": row["name"], "day": row["day"], "week": row["week"]}
            for pk, row in customers.items()
            if row["week"]
        ),
        key=lambda row: (-row["week"], row["customer__name"]),
    )[:50]
    return {
        "by_state": by_state,
        "by_customer": by_customer,
        "total_day": sum(row["day"] for row in by_state),
        "total_week": sum(row["week"] for row in by_state),
    }


def upstream_health(*, now: datetime) -> list[dict[str, Any]]:
    """Return per credential: last 2xx and last confirmed attempt (7 d), last hour's error share, 429 counts.

    Two queries whatever the number of attempts: the credentials, and `ops.tally_windows.attempt_counts`.
    """
    by_credential = attempt_counts(now=now)
    result = []
    for credential in UpstreamCredential.objects.order_by("name"):
        row = by_credential.get(credential.pk, {})
        total = row.get("hour_total", 0)
        bad = row.get("hour_bad", 0)
        result.append(
            {
                "credential": credential,
                "last_2xx": row.get("last_2xx"),
                "last_confirmed": row.get("last_confirmed"),
                "last_any": row.get("last_any"),
                "hour_total": total,
                "hour_bad": bad,
                "error_rate": round(100 * bad / total) if total else None,
                "hour_429": row.get("hour_429", 0),
                "day_429": row.get("day_429", 0),
            }
        )
    return result


def broker_queues() -> list[str]:
    """Return the queues tasks can wait in: every routed queue, the default one, and `celery` (the queue of
    releases before the split, which the housekeeping worker still drains)."""
    routed = [route["queue"] for route in settings.CELERY_TASK_ROUTES.values()]
    return list(dict.fromkeys([*routed, settings.CELERY_TASK_DEFAULT_QUEUE, "celery"]))


@functools.cache
def _broker_client(url: str) -> redis.Redis:
    # One client (and its connection pool) per process: opening Celery's broker connection for each overview
    # cost 1.5-2 ms of CPU. Short timeouts: a broker that does not answer must not hold the page.
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def broker_queue_depths() -> dict[str, int] | None:
    """Return the messages waiting in each queue when the broker is Redis (one round trip), else None."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return None
    names = broker_queues()
    with _broker_client(settings.CELERY_BROKER_URL).pipeline(transaction=False) as pipe:
        for name in names:
            pipe.llen(name)
        return dict(zip(names, (int(count) for count in pipe.execute()), strict=True))


def worker_health(*, now: datetime) -> dict[str, Any]:
    """Return the broker's queue depths (Redis only) and when the sweeper last ran."""
    depths: dict[str, int] | None = None
    depth_error = ""
    try:
        depths = broker_queue_depths()
    except Exception as exc:  # the broker is down: say so instead of failing the page
        depth_error = f"broker unreachable ({type(exc).__name__})"
    heartbeat = Heartbeat.objects.filter(name=SWEEPER_HEARTBEAT).first()
    interval = settings.SWEEP_INTERVAL_SECONDS
    sweeper_age = (now - heartbeat.at).total_seconds() if heartbeat else None
    return {
        "broker_redis": settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")),
        "queue_depth": None if depths is None else sum(depths.values()),
        "queue_detail": "" if depths is None else ", ".join(f"{name} {count}" for name, count in depths.items()),
        "queue_error": depth_error,
        "sweeper_at": heartbeat.at if heartbeat else None,
        "sweeper_age": sweeper_age,
        # Three missed sweeps (and at least a minute) means beat or the worker is not running.
        "sweeper_stale": sweeper_age is None or sweeper_age > max(3 * interval, 60),
    }


def overview(*, now: datetime | None = None) -> dict[str, Any]:
    """Return everything the operations overview shows."""
    now = now or timezone.now()
    return {
        "now": now,
        "counts": rental_counts(now=now),
        "attention": attention_queue(now=now),
        "upstream": upstream_health(now=now),
        "worker": worker_health(now=now),
    }


# --- timeline ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str  # an event kind, or "attempt"
    label: str
    event: RentalEvent | None = None
    attempt: RentAttempt | None = None


def rental_timeline(*, rental: Rental) -> list[TimelineEntry]:
    """Return the rental's events and attempts in one chronological list (two queries)."""
    entries = [
        TimelineEntry(event.at, event.kind, event.get_kind_display(), event=event)
        for event in rental.events.select_related("actor").order_by("at", "id")
    ]
    entries += [
        TimelineEntry(attempt.started_at, "attempt", f"Attempt {attempt.number}", attempt=attempt)
        for attempt in rental.attempts.order_by("number")
    ]
    # An attempt starts before the event that records its outcome: sort attempts first on a tie.
    return sorted(entries, key=lambda entry: (entry.at, entry.kind != "attempt"))


def latest_finding(*, rental: Rental) -> RentalEvent | None:
    """Return the rental's most recent reconciliation finding, if any."""
    return rental.events.filter(kind=RentalEvent.Kind.RECONCILE).order_by("-at", "-id").first()


def request_body_pretty(rental: Rental) -> str:
    """Return the stored request body as indented JSON (or as text if it is not JSON)."""
    raw = bytes(rental.request_body or b"")
    try:
        return json.dumps(json.loads(raw), indent=2, sort_keys=True)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def _left(delta: timedelta) -> str:
    """Return a duration as "5 h 03 min" (or "over")."""
    minutes = int(delta.total_seconds() // 60)
    if minutes <= 0:
        return "over"
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def idempotency_windows(*, rental: Rental, now: datetime) -> dict[str, Any]:
    """Return when the upstream forgets the key, when automatic retries stop, and when a manual replay must end."""
    if rental.first_sent_at is None:
        return {"sent": False}
    key_expires = rental.first_sent_at + UPSTREAM_KEY_WINDOW
    replay_until = rental.first_sent_at + MAX_RETRY_WINDOW
    return {
        "sent": True,
        "key_expires": key_expires,
        "key_left": _left(key_expires - now),
        "retry_deadline": retry_deadline(rental),
        "retry_left": _left((retry_deadline(rental) or now) - now),
        "replay_until": replay_until,
        "replay_left": _left(replay_until - now),
        "replay_open": now < replay_until,
    }


# --- usage ------------------------------------------------------------------------------------------------


@dataclass
class UsageRow:
    customer_ref: str
    rentals: int = 0
    node_hours: Decimal = Decimal(0)
    cost: Decimal = Decimal(0)
    bar: int = 0  # bar length in the chart, 0..100


def usage_by_customer_ref(*, start: date, end: date, now: datetime | None = None) -> list[UsageRow]:
    """Return rentals, node-hours and estimated cost per customer ref for [start, end] (whole days).

    A member counts from `running_since` until `gone_at` (or now), clipped to the period, at its own
    price per hour. Two aggregate queries.
    """
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    period_start = datetime.combine(start, datetime.min.time(), tzinfo=tz)
    day_after_end = datetime.combine(end + timedelta(days=1), datetime.min.time(), tzinfo=tz)
    period_end = min(day_after_end, now)
    rows: dict[str, UsageRow] = {}

    def row_for(ref: str | None) -> UsageRow:
        key = ref or ""
        return rows.setdefault(key, UsageRow(customer_ref=key))

    counted = (
        Rental.objects.filter(created_at__gte=period_start, created_at__lt=day_after_end)
        .order_by()
        .values("customer_ref")
        .annotate(n=Count("id"))
    )
    for item in counted:
        row_for(item["customer_ref"]).rentals = item["n"]
    ran = Greatest(F("running_since"), Value(period_start))
    stopped = Least(Coalesce(F("gone_at"), Value(period_end)), Value(period_end))
    durations = (
        ClusterMember.objects.filter(running_since__isnull=False, running_since__lt=period_end)
        .filter(Q(gone_at__isnull=True) | Q(gone_at__gt=period_start))
        .order_by()
        .values("rental__customer_ref", "price_per_hour")
        .annotate(total=Sum(ExpressionWrapper(stopped - ran, output_field=DurationField())))
    )
    for item in durations:
        total: timedelta | None = item["total"]
        if not total or total <= timedelta(0):
            continue
        hours = Decimal(total.total_seconds()) / Decimal(3600)
        row = row_for(item["rental__customer_ref"])
        row.node_hours += hours
        row.cost += hours * (item["price_per_hour"] or Decimal(0))
    result = sorted(rows.values(), key=lambda row: (-row.cost, -row.node_hours, row.customer_ref))
    top = max((row.cost for row in result), default=Decimal(0))
    for row in result:
        row.node_hours = row.node_hours.quantize(Decimal("0.01"))
        row.cost = row.cost.quantize(Decimal("0.01"))
        row.bar = int(100 * row.cost / top) if top else 0
    return result


# --- audit ------------------------------------------------------------------------------------------------

AUDIT_KINDS = (RentalEvent.Kind.STAFF_ACTION, RentalEvent.Kind.SUPPORT_VIEW)
# The audit page's kind for support's reads of a customer's data that are not about one rental (`SupportRead`).
SUPPORT_READ_KIND = "support_read"


def audit_events(
    *, actor: User | None = None, kind: str = "", since: date | None = None, until: date | None = None
) -> QuerySet[RentalEvent]:
    """Return staff actions and support views, newest first, filtered by who, what kind and when."""
    events = RentalEvent.objects.filter(kind__in=AUDIT_KINDS).select_related("actor", "rental", "rental__customer")
    if actor is not None:
        events = events.filter(actor=actor)
    if kind == SUPPORT_READ_KIND:
        return events.none()
    if kind in AUDIT_KINDS:
        events = events.filter(kind=kind)
    return _within(events, since=since, until=until).order_by("-at", "-id")


def audit_support_reads(
    *, actor: User | None = None, kind: str = "", since: date | None = None, until: date | None = None
) -> QuerySet[SupportRead]:
    """Return support's reads of customers' lists, teams, webhooks and usage, newest first, filtered alike."""
    reads = SupportRead.objects.select_related("actor", "customer")
    if kind and kind != SUPPORT_READ_KIND:
        return reads.none()
    if actor is not None:
        reads = reads.filter(actor=actor)
    return _within(reads, since=since, until=until).order_by("-at", "-id")


def _within(rows: QuerySet[Any], *, since: date | None, until: date | None) -> QuerySet[Any]:
    """Keep the rows whose `at` falls from the day `since` to the day `until` (included), in local time."""
    tz = timezone.get_current_timezone()
    if since is not None:
        rows = rows.filter(at__gte=datetime.combine(since, datetime.min.time(), tzinfo=tz))
    if until is not None:
        rows = rows.filter(at__lt=datetime.combine(until + timedelta(days=1), datetime.min.time(), tzinfo=tz))
    return rows
