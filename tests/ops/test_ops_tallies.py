"""The overview's tallies give the same figures as counting the rows, and roll back with their transaction."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from ops import selectors
from ops.models import AttemptTally, CustomerTally, StateTally
from ops.tallies import rebuild_tallies
from rentals.models import Rental, RentAttempt
from rentals.states import TRANSITIONS
from rentals.transitions import rental_transition
from tests.doubles import Clock

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


def walk(rental: Rental, *states: str) -> Rental:
    """Move a rental through `states` with the one writer (tallies count state changes from it, not from updates)."""
    for state in states:
        assert rental_transition(rental_id=rental.pk, from_status=rental.status, to_status=state)
        rental.refresh_from_db()
    return rental


def counted_from_rows(now: datetime) -> dict[str, Any]:
    """The overview's rental counts as a direct aggregate over the rows (how they were computed before tallies)."""
    day, week = now - timedelta(days=1), now - timedelta(days=7)
    recent = Rental.objects.filter(created_at__gte=week).order_by()
    day_count = Count("id", filter=Q(created_at__gte=day))
    by_state = [
        (row["status"], row["day"], row["week"])
        for row in recent.values("status").annotate(day=day_count, week=Count("id")).order_by("status")
    ]
    by_customer = [
        (row["customer__name"], row["day"], row["week"])
        for row in recent.values("customer__name")
        .annotate(day=day_count, week=Count("id"))
        .order_by("-week", "customer__name")[:50]
    ]
    return {"by_state": by_state, "by_customer": by_customer}


def counted_from_tallies(now: datetime) -> dict[str, Any]:
    counts = selectors.rental_counts(now=now)
    return {
        "by_state": [(row["status"], row["day"], row["week"]) for row in counts["by_state"]],
        "by_customer": [(row["customer__name"], row["day"], row["week"]) for row in counts["by_customer"]],
    }


def attempts_from_rows(now: datetime) -> dict[str, Any]:
    hour, day, week = now - timedelta(hours=1), now - timedelta(days=1), now - timedelta(days=7)
    [row] = (
        RentAttempt.objects.filter(started_at__gte=week)
        .order_by()
        .values("rental__credential_id")
        .annotate(
            last_2xx=Max("started_at", filter=Q(http_status__gte=200, http_status__lt=300)),
            last_confirmed=Max("started_at", filter=Q(classification="confirmed")),
            hour_total=Count("id", filter=Q(started_at__gte=hour)),
            hour_bad=Count("id", filter=Q(started_at__gte=hour, classification__in=("inconclusive", "never_sent"))),
            hour_429=Count("id", filter=Q(started_at__gte=hour, http_status=429)),
            day_429=Count("id", filter=Q(started_at__gte=day, http_status=429)),
        )
    )
    return {key: value for key, value in row.items() if key != "rental__credential_id"}


def attempts_from_tallies(now: datetime) -> dict[str, Any]:
    [row] = [r for r in selectors.upstream_health(now=now) if r["last_any"] is not None]
    keys = ("last_2xx", "last_confirmed", "hour_total", "hour_bad", "hour_429", "day_429")
    return {key: row[key] for key in keys}


@pytest.fixture
def history(clock: Clock, make_rental, globex, acme) -> Clock:  # type: ignore[no-untyped-def]
    """300 rentals of three customers created over ten days, each walked through the state machine later on."""
    from accounts.models import Customer

    initech = Customer.objects.create(
        name="Initech", customer_ref="initech", default_credential=acme.default_credential
    )
    rng = random.Random(7)
    for number in range(300):
        clock.now = START + timedelta(seconds=rng.uniform(0, 10 * 86400))
        rental = make_rental(customer=[None, globex, initech][number % 3])
        for _ in range(rng.randrange(4)):
            # Later, by minutes or days (some after the others were created: the tallies must not care).
            clock.now += timedelta(seconds=rng.uniform(60, 3 * 86400))
            current = Rental.objects.get(pk=rental.pk).status
            choices = sorted(TRANSITIONS[current])
            if not choices:
                break
            rental_transition(rental_id=rental.pk, from_status=current, to_status=rng.choice(choices))
        if number % 2:
            RentAttempt.objects.create(
                rental=rental,
                number=1,
                started_at=rental.created_at + timedelta(seconds=rng.uniform(0, 7200)),
                duration_ms=30,
                http_status=rng.choice([200, 200, 429, 409, None]),
                classification=rng.choice(["confirmed", "refused", "inconclusive", "never_sent"]),
            )
    return clock


def moments() -> list[datetime]:
    """Clocks on and off the hour, before, inside and after the history."""
    rng = random.Random(11)
    picked = [START + timedelta(seconds=rng.uniform(0, 16 * 86400)) for _ in range(12)]
    return [*picked, START + timedelta(days=7), START + timedelta(days=8, hours=3), START - timedelta(hours=5)]


def edge_moments(times: list[datetime], window: timedelta) -> list[datetime]:
    """Clocks whose window starts minutes before each of `times`: those rows fall in its first part-hour."""
    return [
        moment + window - timedelta(minutes=minutes) for moment, minutes in zip(times, (1, 7, 29, 58), strict=False)
    ]


def test_the_overview_counts_from_tallies_equal_counting_the_rows(history: Clock) -> None:
    created = list(Rental.objects.order_by("?").values_list("created_at", flat=True)[:4])
    edges = edge_moments(created, timedelta(days=7)) + edge_moments(created, timedelta(days=1))
    for now in moments() + edges:
        assert counted_from_tallies(now) == counted_from_rows(now), now
    assert any(counted_from_rows(now)["by_state"] for now in moments()), "the clocks see rentals"


def test_upstream_health_from_tallies_equals_counting_the_attempts(history: Clock) -> None:
    seen = 0
    too_many = list(RentAttempt.objects.filter(http_status=429).values_list("started_at", flat=True)[:4])
    started = list(RentAttempt.objects.order_by("?").values_list("started_at", flat=True)[:4])
    edges = edge_moments(too_many, timedelta(days=1)) + edge_moments(started, timedelta(hours=1))
    for now in moments() + edges:
        if not RentAttempt.objects.filter(started_at__gte=now - timedelta(days=7)).exists():
            continue
        seen += 1
        assert attempts_from_tallies(now) == attempts_from_rows(now), now
    assert seen >= 5


def test_rebuilding_the_tallies_gives_the_rows_kept_up_as_they_changed(history: Clock) -> None:
    def rows() -> list[Any]:
        return [
            sorted((t.hour, t.status, t.count) for t in StateTally.objects.exclude(count=0)),
            sorted((t.span, t.start, t.customer_id, t.count) for t in CustomerTally.objects.exclude(count=0)),
            sorted(
                (t.start, t.credential_id, t.total, t.bad, t.http_429, t.last_2xx_at, t.last_confirmed_at, t.last_at)
                for t in AttemptTally.objects.all()
            ),
        ]

    kept = rows()
    rebuild_tallies()
    assert rows() == kept


def test_a_rolled_back_state_change_or_order_leaves_the_counts_as_they_were(make_rental, acme) -> None:
    rental = make_rental(status="queued")
    now = timezone.now()
    before = counted_from_tallies(now)
    assert before["by_state"] == [("queued", 1, 1)]

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        rental_transition(rental_id=rental.pk, from_status="queued", to_status="sending")
        walk(make_rental(pod_name="other", executors=["exec-c", "exec-d"]), "sending", "rented", "ready")
        assert counted_from_tallies(now)["by_state"] == [("ready", 1, 1), ("sending", 1, 1)]
        raise Abort
    assert counted_from_tallies(now) == before == counted_from_rows(now)


def test_a_deleted_rental_leaves_the_counts(make_rental) -> None:
    keep = walk(make_rental(), "sending", "rented", "ready")
    gone = walk(make_rental(pod_name="gone", executors=["exec-c", "exec-d"]), "sending", "rented", "ready")
    gone.delete()
    now = timezone.now()
    assert counted_from_tallies(now) == counted_from_rows(now)
    assert counted_from_tallies(now)["by_state"] == [("ready", 1, 1)] and keep.pk
