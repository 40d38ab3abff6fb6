"""The operations overview's figures: what needs attention, rentals per state and customer, upstream and worker
health.

Plain ORM aggregates over indexes, computed at most once per OPS_OVERVIEW_CACHE_SECONDS for every staff member
and process (Django's default cache, shared when CACHE_URL is Redis); the page shows how old they are.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from accounts.models import Customer, UpstreamCredential
from ops.links import rental_page_links
from ops.outcome_chart import outcome_charts
from ops.ready_chart import ready_charts
from rentals.heartbeats import sweeper_last_run
from rentals.models import STATUS_LABELS, Rental, RentAttempt
from rentals.selectors import members_grace, rented_without_members
from rentals.states import RentalStatus

OVERVIEW_CACHE_KEY = "ops:overview"
ATTENTION_LIMIT = 50
HOUR, DAY, WEEK = timedelta(hours=1), timedelta(days=1), timedelta(days=7)
UNHEALTHY = (RentAttempt.Classification.INCONCLUSIVE, RentAttempt.Classification.NEVER_SENT)


def overview_get() -> dict[str, Any]:
    """Return the overview's figures from the cache (computed afresh when it has none) and their age in seconds."""
    figures = cache.get(OVERVIEW_CACHE_KEY)
    if figures is None:
        figures = overview_compute(now=timezone.now())
        cache.set(OVERVIEW_CACHE_KEY, figures, settings.OPS_OVERVIEW_CACHE_SECONDS)
    age = max(0, int((timezone.now() - figures["now"]).total_seconds()))
    return {**figures, "age_seconds": age, "cache_seconds": settings.OPS_OVERVIEW_CACHE_SECONDS}


def overview_compute(*, now: datetime) -> dict[str, Any]:
    """Return everything the operations overview shows, as of `now`."""
    return {
        "now": now,
        "counts": rental_counts(now=now),
        "attention": attention_queue(now=now),
        "upstream": upstream_health(now=now),
        "worker": worker_health(now=now),
        "estimates": estimate_error(now=now),
        # Inside the shared cache with the rest, drawn: a cached page neither queries nor renders them again.
        "charts": _charts_render(now=now),
    }


def _charts_render(*, now: datetime) -> dict[str, SafeString]:
    """Return the markup of rentals per hour by outcome and of time to ready, each for 24 hours and 7 days.

    Drawn once per cache period: their hundreds of SVG elements cost far more to render than the rest of the page.
    """
    outcomes = [render_to_string("ops/_outcome_chart.html", {"chart": chart}) for chart in outcome_charts(now=now)]
    ready = [render_to_string("ops/_ready_chart.html", {"chart": chart}) for chart in ready_charts(now=now)]
    # Each piece is the template engine's own escaped output.
    return {"outcomes": mark_safe("".join(outcomes)), "ready": mark_safe("".join(ready))}  # noqa: S308


def rental_counts(*, now: datetime) -> dict[str, Any]:
    """Return rentals created in the last 24 h and 7 d, by state and by customer (the 50 with most).

    One pass over the week's rentals per (state, customer), read off the `rental_created_cover` index alone (it
    holds both), summed here both ways (a second `GROUP BY` would scan the week again); then the customers' names.
    """
    recent = Rental.objects.filter(created_at__gte=now - WEEK).order_by()
    rows = recent.values("status", "customer_id").annotate(
        day=Count("created_at", filter=Q(created_at__gte=now - DAY)), week=Count("created_at")
    )
    states: dict[str, Counter[str]] = defaultdict(Counter)
    customers: dict[int, Counter[str]] = defaultdict(Counter)
    for row in rows:
        for window in ("day", "week"):
            states[row["status"]][window] += row[window]
            customers[row["customer_id"]][window] += row[window]
    names = dict(Customer.objects.filter(pk__in=list(customers)).values_list("pk", "name"))
    by_customer: list[dict[str, Any]] = [{"customer__name": names[pk], **counts} for pk, counts in customers.items()]
    return {
        "by_state": [{"status": key, "label": STATUS_LABELS.get(key, key), **states[key]} for key in sorted(states)],
        "by_customer": sorted(by_customer, key=lambda row: (-row["week"], row["customer__name"]))[:50],
        "total_day": sum(counts["day"] for counts in states.values()),
        "total_week": sum(counts["week"] for counts in states.values()),
    }


def estimate_error(*, now: datetime) -> dict[str, Any]:
    """Return how far Lium's estimates were off for the rentals that became ready in the last day.

    The error is the time to ready taken (from the first send) minus the estimate at the order, in seconds:
    positive means later than estimated. Its median and 90th percentile (nearest rank), and how many rentals; the
    `rental_estimate_ready` index holds exactly the rentals that had an estimate.
    """
    rows = Rental.objects.filter(
        ready_at__gte=now - DAY, ready_at__lte=now, estimated_ready_seconds__isnull=False, ready_seconds__isnull=False
    ).values_list("ready_seconds", "estimated_ready_seconds")
    errors = sorted(taken - estimated for taken, estimated in rows if taken is not None and estimated is not None)
    if not errors:
        return {"count": 0, "median": None, "p90": None}
    return {
        "count": len(errors),
        "median": round(statistics.median(errors)),
        "p90": errors[math.ceil(0.9 * len(errors)) - 1],
    }


def _latest_attempt(since: datetime, **filters: Any) -> Subquery:
    """The start of the credential's latest attempt since `since` matching `filters` (off `attempt_started`)."""
    attempts = RentAttempt.objects.filter(rental__credential=OuterRef("pk"), started_at__gte=since, **filters)
    return Subquery(attempts.order_by("-started_at").values("started_at")[:1])


def upstream_health(*, now: datetime) -> list[dict[str, Any]]:
    """Return per credential: last 2xx and last confirmed attempt (7 d), last hour's error share, 429 counts.

    Two queries: the counts of the last hour's attempts and of the last day's 429s (off `attempt_started` and
    `attempt_429_started`), and the credentials with their latest attempts.
    """
    hour = Q(started_at__gte=now - HOUR)
    counts = {
        row["rental__credential_id"]: row
        for row in RentAttempt.objects.filter(hour | Q(started_at__gte=now - DAY, http_status=429))
        .order_by()
        .values("rental__credential_id")
        .annotate(
            total=Count("id", filter=hour),
            bad=Count("id", filter=hour & Q(classification__in=UNHEALTHY)),
            hour_429=Count("id", filter=hour & Q(http_status=429)),
            day_429=Count("id", filter=Q(http_status=429)),
        )
    }
    credentials = UpstreamCredential.objects.order_by("name").values(
        "pk",
        "name",
        "active",
        last_2xx=_latest_attempt(now - WEEK, http_status__gte=200, http_status__lt=300),
        last_confirmed=_latest_attempt(now - WEEK, classification=RentAttempt.Classification.CONFIRMED),
    )
    result = []
    for credential in credentials:
        row = counts.get(credential["pk"], {})
        total, bad = row.get("total", 0), row.get("bad", 0)
        result.append(
            {
                "name": credential["name"],
                "active": credential["active"],
                "last_2xx": credential["last_2xx"],
                "last_confirmed": credential["last_confirmed"],
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
    # One client (and its connection pool) per process. Short timeouts: a broker that does not answer must not
    # hold the page.
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
    sweeper = sweeper_last_run(now=now)
    return {
        "broker_redis": settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")),
        "queue_depth": None if depths is None else sum(depths.values()),
        "queue_detail": "" if depths is None else ", ".join(f"{name} {count}" for name, count in depths.items()),
        "queue_error": depth_error,
        "sweeper_at": sweeper.at,
        "sweeper_stale": sweeper.stale,
    }


@dataclass(frozen=True)
class AttentionItem:
    """One row of the attention table."""

    url: str  # the rental's staff page
    pod_name: str
    customer_name: str
    status: str
    status_label: str
    reason: str
    since: datetime | None


def attention_rentals(*, now: datetime) -> QuerySet[Rental]:
    """Return the rentals a human should look at, least recently updated first.

    The `rental_attention` index holds exactly the states these can be in, in `updated_at` order: the
    first rows that meet a reason are the answer, however many rentals are unknown or degraded.
    """
    minutes = {
        RentalStatus.RETRYING: settings.OPS_RETRYING_ATTENTION_MINUTES,
        RentalStatus.QUEUED: settings.OPS_QUEUED_ATTENTION_MINUTES,
        RentalStatus.TERMINATING: settings.OPS_TERMINATING_ATTENTION_MINUTES,
    }
    since = {status: now - timedelta(minutes=value) for status, value in minutes.items()}
    # One equality per state (not `status__in`): PostgreSQL proves that an OR of those matches the index's
    # condition, and reads the index in order instead of sorting every unknown and degraded rental.
    reasons = (
        Q(status=RentalStatus.UNKNOWN)
        | Q(status=RentalStatus.DEGRADED)
        | Q(status=RentalStatus.RETRYING, first_sent_at__lt=since[RentalStatus.RETRYING])
        | Q(status=RentalStatus.SENDING, lease_until__lt=now)
        | Q(status=RentalStatus.QUEUED, created_at__lt=since[RentalStatus.QUEUED])
        | Q(status=RentalStatus.TERMINATING, updated_at__lt=since[RentalStatus.TERMINATING])
        | rented_without_members(now=now)
    )
    return Rental.objects.filter(reasons).order_by("updated_at")


def attention_queue(*, now: datetime) -> list[AttentionItem]:
    """Return the attention table: why each rental is listed and since when, oldest problem first (one query)."""
    columns = ("public_id", "pod_name", "customer__name", "status", "error_code", "attempt_count")
    times = ("created_at", "updated_at", "first_sent_at", "lease_until", "rented_at")
    link = rental_page_links()
    items = []
    for row in attention_rentals(now=now).values(*columns, *times)[:ATTENTION_LIMIT]:
        reason, since = _reason(row)
        items.append(
            AttentionItem(
                url=link(row["public_id"]),
                pod_name=row["pod_name"],
                customer_name=row["customer__name"],
                status=row["status"],
                status_label=STATUS_LABELS.get(row["status"], row["status"]),
                reason=reason,
                since=since,
            )
        )
    return sorted(items, key=lambda item: item.since or now)


def _reason(row: dict[str, Any]) -> tuple[str, datetime | None]:
    """Return why the rental is listed and since when."""
    status = row["status"]
    since: datetime | None
    if status == RentalStatus.UNKNOWN:
        reason, since = "Outcome unknown: reconcile", row["updated_at"]
    elif status == RentalStatus.DEGRADED:
        reason, since = "Degraded: a member failed", row["updated_at"]
    elif status == RentalStatus.RETRYING:
        minutes = settings.OPS_RETRYING_ATTENTION_MINUTES
        reason, since = f"Retrying for more than {minutes} min ({row['attempt_count']} attempts)", row["first_sent_at"]
    elif status == RentalStatus.SENDING:
        reason, since = "Stuck lease: the worker's lease expired mid-attempt", row["lease_until"]
    elif status == RentalStatus.RENTED:
        minutes = int(members_grace().total_seconds() // 60)
        reason = f"Rented, but its members have not appeared within {minutes} min: reconcile"
        since = row["rented_at"] or row["updated_at"]
    elif status == RentalStatus.QUEUED:
        minutes = settings.OPS_QUEUED_ATTENTION_MINUTES
        reason, since = f"Queued for more than {minutes} min: is a worker running?", row["created_at"]
    else:
        minutes = settings.OPS_TERMINATING_ATTENTION_MINUTES
        reason, since = f"Terminating for more than {minutes} min", row["updated_at"]
    if row["error_code"] and status in (RentalStatus.UNKNOWN, RentalStatus.RETRYING):
        reason = f"{reason} · {row['error_code']}"
    return reason, since
