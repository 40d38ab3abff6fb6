"""Reads for staff pages: a rental's timeline, usage and the audit log (the overview: `ops.overview`; the search:
`ops.search`).

Every function runs a fixed number of queries, whatever the number of rows: aggregates, `select_related`
and bounded lookups on indexed columns only (the search must stay fast at a million rentals).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest, Least
from django.utils import timezone

from accounts.models import AccountChange, SupportRead
from rentals.models import ClusterMember, Rental, RentalEvent, RentAttempt
from rentals.outcomes import MAX_RETRY_WINDOW, retry_deadline

UPSTREAM_KEY_WINDOW = timedelta(hours=24)


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


def audit_account_changes(
    *, actor: User | None = None, since: date | None = None, until: date | None = None, **_kind: str
) -> QuerySet[AccountChange]:
    """Return changes to people's sign-in (password, e-mail, two-factor, sessions), newest first: `actor` is
    whoever made them or whom they are about."""
    changes = AccountChange.objects.select_related("actor")
    if actor is not None:
        changes = changes.filter(Q(actor=actor) | Q(user=actor))
    return _within(changes, since=since, until=until).order_by("-at", "-id")


def _within(rows: QuerySet[Any], *, since: date | None, until: date | None) -> QuerySet[Any]:
    """Keep the rows whose `at` falls from the day `since` to the day `until` (included), in local time."""
    tz = timezone.get_current_timezone()
    if since is not None:
        rows = rows.filter(at__gte=datetime.combine(since, datetime.min.time(), tzinfo=tz))
    if until is not None:
        rows = rows.filter(at__lt=datetime.combine(until + timedelta(days=1), datetime.min.time(), tzinfo=tz))
    return rows
