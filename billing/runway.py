"""Lium balance runway: how many hours each credential's balance lasts at the cost of its running clusters.

Beat reads `GET /users/me` per active credential (`runway_check`), stores a `BalanceReading`, and opens a
`RunwayAlert` when the runway falls below RUNWAY_ALERT_HOURS. An open alert is not raised again; it closes when
the runway recovers, and only a new fall alerts again. The alert goes to the operators' webhook and by e-mail
to every user in the `operator` group (`billing.operator_alerts`), tried again by each check until it went.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery, Sum
from django.utils import timezone

from accounts.models import UpstreamCredential
from billing.models import BalanceReading, RunwayAlert
from rentals import upstream
from rentals.models import Rental
from rentals.states import HOLDS_CLUSTER_STATES, RentalStatus

logger = logging.getLogger(__name__)

# Clusters that Lium bills: held, and those being removed (billed until they are gone).
BILLING_STATES = frozenset(HOLDS_CLUSTER_STATES | {RentalStatus.TERMINATING})


def credential_hourly_cost(*, credential: UpstreamCredential) -> Decimal:
    """Return the USD/hour of every running cluster on this credential."""
    total = Rental.objects.filter(credential=credential, status__in=BILLING_STATES).aggregate(t=Sum("price_per_hour"))
    return total["t"] or Decimal(0)


def runway_hours(balance: Decimal | None, hourly_cost: Decimal) -> Decimal | None:
    """Return balance ÷ hourly cost in hours (0 when the balance is gone), None when nothing runs or unknown."""
    if balance is None or hourly_cost <= 0:
        return None
    if balance <= 0:
        return Decimal(0)
    return (balance / hourly_cost).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def balance_read(*, credential: UpstreamCredential, now: datetime | None = None) -> BalanceReading:
    """Read the credential's balance from Lium, store it with its runway, and raise or close the alert."""
    now = now or timezone.now()
    hourly = credential_hourly_cost(credential=credential)
    try:
        account = upstream.client_for(credential).me()
    except (upstream.UpstreamError, ValueError) as exc:
        # Never the secret: the error tree's messages carry the upstream's words only.
        return BalanceReading.objects.create(
            credential=credential, at=now, hourly_cost_usd=hourly, error=str(exc)[:300] or type(exc).__name__
        )
    runway = runway_hours(account.balance, hourly)
    with transaction.atomic():
        reading = BalanceReading.objects.create(
            credential=credential, at=now, balance_usd=account.balance, hourly_cost_usd=hourly, runway_hours=runway
        )
        _alert_or_resolve(reading)
    return reading


def _alert_or_resolve(reading: BalanceReading) -> None:
    low = reading.runway_hours is not None and reading.runway_hours < Decimal(str(settings.RUNWAY_ALERT_HOURS))
    open_alerts = RunwayAlert.objects.filter(credential_id=reading.credential_id, resolved_at__isnull=True)
    if not low:
        open_alerts.update(resolved_at=reading.at)
        return
    if open_alerts.exists():
        return  # alerted once for this fall
    assert reading.balance_usd is not None and reading.runway_hours is not None  # low implies both
    RunwayAlert.objects.create(
        credential_id=reading.credential_id,
        at=reading.at,
        balance_usd=reading.balance_usd,
        hourly_cost_usd=reading.hourly_cost_usd,
        runway_hours=reading.runway_hours,
    )
    logger.warning(
        "Lium balance runway of credential %s is %s h (below %s h).",
        reading.credential_id,
        reading.runway_hours,
        settings.RUNWAY_ALERT_HOURS,
    )


def balances_read_all(*, now: datetime | None = None) -> int:
    """Read every active credential's balance; return how many were read."""
    credentials = list(UpstreamCredential.objects.filter(active=True))
    for credential in credentials:
        balance_read(credential=credential, now=now)
    return len(credentials)


@dataclass(frozen=True)
class RunwayRow:
    credential_name: str
    credential_id: int
    at: datetime | None
    balance_usd: Decimal | None
    hourly_cost_usd: Decimal
    runway_hours: Decimal | None
    error: str
    low: bool
    alerted: bool


def runway_rows() -> list[RunwayRow]:
    """Return the latest reading of each active credential, for the ops overview and the metrics (3 queries)."""
    threshold = Decimal(str(settings.RUNWAY_ALERT_HOURS))
    open_alerts = set(RunwayAlert.objects.filter(resolved_at__isnull=True).values_list("credential_id", flat=True))
    latest = BalanceReading.objects.filter(credential_id=OuterRef("pk")).order_by("-at", "-id").values("pk")[:1]
    credentials = list(
        UpstreamCredential.objects.filter(active=True).annotate(reading_id=Subquery(latest)).order_by("name")
    )
    readings = BalanceReading.objects.in_bulk([c.reading_id for c in credentials if c.reading_id])  # type: ignore[attr-defined]
    rows = []
    for credential in credentials:
        reading = readings.get(credential.reading_id)  # type: ignore[attr-defined]
        runway = reading.runway_hours if reading else None
        rows.append(
            RunwayRow(
                credential_name=credential.name,
                credential_id=credential.pk,
                at=reading.at if reading else None,
                balance_usd=reading.balance_usd if reading else None,
                hourly_cost_usd=reading.hourly_cost_usd if reading else Decimal(0),
                runway_hours=runway,
                error=reading.error if reading else "",
                low=runway is not None and runway < threshold,
                alerted=credential.pk in open_alerts,
            )
        )
    return rows
