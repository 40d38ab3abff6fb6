"""The overview's figures as an operator reads them: rentals per state and customer in the last 24 h and 7 d,
the upstream's last hour and day, whatever the clock; and one short shared cache whose age the page shows."""

from __future__ import annotations

import random
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ops import overview
from rentals.models import Rental, RentAttempt
from rentals.states import TRANSITIONS
from rentals.transitions import rental_transition

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


class Clock:
    """`timezone.now()` for everything that asks (auto_now_add included), moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.at = START
        monkeypatch.setattr(timezone, "now", lambda: self.at)


@pytest.fixture
def history(monkeypatch: pytest.MonkeyPatch, make_rental, globex, acme) -> Clock:  # type: ignore[no-untyped-def]
    """120 rentals of three customers created over ten days, some walked through the state machine later on,
    every other one with an attempt."""
    from accounts.models import Customer

    initech = Customer.objects.create(
        name="Initech", customer_ref="initech", default_credential=acme.default_credential
    )
    clock = Clock(monkeypatch)
    rng = random.Random(7)
    for number in range(120):
        clock.at = START + timedelta(seconds=rng.uniform(0, 10 * 86400))
        rental = make_rental(
            customer=[None, globex, initech][number % 3],
            pod_name=f"train-{number}",
            executors=[f"exec-{number}-a", f"exec-{number}-b"],
        )
        for _ in range(rng.randrange(3)):
            clock.at += timedelta(seconds=rng.uniform(60, 2 * 86400))
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
    """Clocks before, inside and after the history."""
    rng = random.Random(11)
    picked = [START + timedelta(seconds=rng.uniform(0, 16 * 86400)) for _ in range(6)]
    return [*picked, START + timedelta(days=7), START - timedelta(hours=5)]


def counted_by_hand(now: datetime) -> dict[str, Any]:
    """The rental counts, rental by rental in Python."""
    states: dict[str, Counter[str]] = {"day": Counter(), "week": Counter()}
    customers: dict[str, Counter[str]] = {"day": Counter(), "week": Counter()}
    for rental in Rental.objects.select_related("customer"):
        for window, since in (("day", now - timedelta(days=1)), ("week", now - timedelta(days=7))):
            if since <= rental.created_at:
                states[window][rental.status] += 1
                customers[window][rental.customer.name] += 1
    return {
        "by_state": sorted((key, states["day"][key], count) for key, count in states["week"].items()),
        "by_customer": sorted((key, customers["day"][key], count) for key, count in customers["week"].items()),
    }


def test_the_rental_counts_hold_for_any_clock(history: Clock) -> None:
    for now in moments():
        counts = overview.rental_counts(now=now)
        shown = {
            "by_state": [(row["status"], row["day"], row["week"]) for row in counts["by_state"]],
            "by_customer": sorted((row["customer__name"], row["day"], row["week"]) for row in counts["by_customer"]),
        }
        assert shown == counted_by_hand(now), now
        assert counts["total_week"] == sum(week for _status, _day, week in shown["by_state"])
    assert any(overview.rental_counts(now=now)["total_week"] for now in moments()), "the clocks see rentals"


def test_the_upstream_figures_hold_for_any_clock(history: Clock) -> None:
    attempts = list(RentAttempt.objects.all())
    seen = 0
    for now in moments() + [attempt.started_at + timedelta(minutes=30) for attempt in attempts[:4]]:
        [row] = overview.upstream_health(now=now)
        hour = [a for a in attempts if now - timedelta(hours=1) <= a.started_at]
        week = [a for a in attempts if now - timedelta(days=7) <= a.started_at]
        ok = [a.started_at for a in week if a.http_status and 200 <= a.http_status < 300]
        confirmed = [a.started_at for a in week if a.classification == "confirmed"]
        assert row["last_2xx"] == max(ok, default=None), now
        assert row["last_confirmed"] == max(confirmed, default=None), now
        assert row["hour_total"] == len(hour)
        assert row["hour_bad"] == sum(a.classification in ("inconclusive", "never_sent") for a in hour)
        assert row["hour_429"] == sum(a.http_status == 429 for a in hour)
        day = [a for a in attempts if now - timedelta(days=1) <= a.started_at]
        assert row["day_429"] == sum(a.http_status == 429 for a in day)
        seen += bool(hour)
    assert seen >= 4, "the clocks see the last hour's attempts"


def test_the_figures_are_shared_for_a_while_and_say_how_old_they_are(
    make_rental, sam, olga, client_for, monkeypatch
) -> None:
    make_rental(status="ready")
    real_now = timezone.now()
    clock = Clock(monkeypatch)
    clock.at = real_now
    first = client_for(sam).get("/ops/").content.decode()
    assert "Figures as of 0 s ago" in first

    make_rental(status="ready")
    clock.at += timedelta(seconds=12)
    later = client_for(olga).get("/ops/").content.decode()
    assert "Figures as of 12 s ago" in later, "another staff member sees the same figures, 12 s older"
    assert by_state_total(later) == by_state_total(first) == "1"

    from django.core.cache import cache

    cache.delete(overview.OVERVIEW_CACHE_KEY)  # as when they expire
    fresh = client_for(olga).get("/ops/").content.decode()
    assert "Figures as of 0 s ago" in fresh and by_state_total(fresh) == "2"


def by_state_total(html: str) -> str:
    table = html.split('data-testid="by-state"', 1)[1].split("</table>", 1)[0]
    match = re.search(r"<th>Total</th><th class=\"num\">(\d+)</th>", table)
    assert match is not None
    return match.group(1)
