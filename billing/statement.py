"""Our cost against Lium's statement: per credential, pod and UTC day, daily on beat (`statement_check`).

Beat reads `GET /billing/statement` for the previous STATEMENT_CHECK_DAYS UTC days of every active credential
and compares each pod's amount per day with our cost (`billing.pod_cost`; the statement's pods map to ours by
`pod_id`, a rental's `ClusterMember`). Pods on the statement that are not ours (another tool on the same Lium
account) are left out. Each pod-day either side billed is stored as a `StatementLine`, `agrees` when the two are
within a cent; usage lines whose days all agree say `confirmed`. A day with any disagreeing pod opens one
operator notice per credential and day (closed when a later check finds the day agrees); the ops page lists
every disagreeing line with both figures.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import UpstreamCredential
from billing.models import OperatorNotice, StatementLine
from billing.operator_notices import notice_raise, notice_resolve
from billing.pod_cost import day_bounds, pod_day_costs, rental_pods
from billing.usage import with_terminated_at
from rentals import upstream
from rentals.models import Rental

logger = logging.getLogger(__name__)

CENT = Decimal("0.01")
PLACES = Decimal("0.0001")
MISMATCH = OperatorNotice.Kind.STATEMENT_MISMATCH
LISTING_REFUSED = OperatorNotice.Kind.LISTING_REFUSED


@dataclass(frozen=True)
class CheckResult:
    credential_id: int
    lines: int = 0
    disagreeing: int = 0
    error: str = ""


def previous_days(now: datetime, count: int) -> list[date]:
    """Return the `count` complete UTC days before `now`'s, oldest first."""
    today = now.astimezone(UTC).date()
    return [today - timedelta(days=n) for n in range(count, 0, -1)]


def _rentals_billing_within(credential: UpstreamCredential, start: datetime, end: datetime) -> list[Rental]:
    """The credential's rentals that may have billed within [start, end)."""
    rented = Rental.objects.filter(credential=credential, rented_at__isnull=False, rented_at__lt=end)
    rentals = with_terminated_at(rented)
    return list(rentals.filter(Q(terminated_at__isnull=True) | Q(terminated_at__gt=start)))


def statement_compare(*, credential: UpstreamCredential, days: list[date], now: datetime | None = None) -> CheckResult:
    """Read the credential's statement for `days` and store every pod-day's comparison; notify disagreeing days."""
    now = now or timezone.now()
    try:
        statement = upstream.client_for(credential).billing_statement(
            start_day=days[0].isoformat(), end_day=days[-1].isoformat()
        )
    except (upstream.UpstreamError, ValueError) as exc:
        # Never the secret: the error tree's messages carry the upstream's words only.
        logger.warning("Statement of credential %s not read: %s", credential.pk, exc)
        return CheckResult(credential.pk, error=str(exc)[:300] or type(exc).__name__)
    rentals = _rentals_billing_within(credential, day_bounds(days[0])[0], day_bounds(days[-1])[1])
    pods = rental_pods(rentals, now=now)
    spans = [span for rental_spans in pods.spans.values() for span in rental_spans]
    ours = pod_day_costs(spans, days, now=now)
    rental_of = pods.pod_rentals
    lium = {
        (pod.pod_id, day): amount
        for pod in statement.pods
        if pod.pod_id in rental_of
        for day, amount in pod.days.items()
        if day in days
    }
    lines = []
    for pod_id, day in sorted(set(ours) | set(lium)):
        our_cost = ours.get((pod_id, day), Decimal(0)).quantize(PLACES)
        their_cost = lium.get((pod_id, day))
        lines.append(
            StatementLine(
                credential=credential,
                rental_id=rental_of[pod_id],
                pod_id=pod_id,
                day=day,
                ours_usd=our_cost,
                lium_usd=None if their_cost is None else their_cost.quantize(PLACES),
                agrees=abs((their_cost or Decimal(0)) - our_cost) <= CENT,
                checked_at=now,
            )
        )
    with transaction.atomic():
        StatementLine.objects.filter(credential=credential, day__in=days).delete()
        StatementLine.objects.bulk_create(lines)
    _notify(credential, days, [line for line in lines if not line.agrees], now)
    return CheckResult(credential.pk, lines=len(lines), disagreeing=sum(not line.agrees for line in lines))


def _notify(credential: UpstreamCredential, days: list[date], disagreeing: list[StatementLine], now: datetime) -> None:
    """One notice per credential and disagreeing day; a day that agrees now closes its notice."""
    for day in days:
        key = f"{credential.pk}:{day.isoformat()}"
        on_day = [line for line in disagreeing if line.day == day]
        if not on_day:
            notice_resolve(kind=MISMATCH, key=key, now=now)
            continue
        ours = sum((line.ours_usd for line in on_day), Decimal(0))
        theirs = sum((line.lium_usd or Decimal(0) for line in on_day), Decimal(0))
        notice_raise(
            kind=MISMATCH,
            key=key,
            credential_id=credential.pk,
            subject=f"Lium's statement for {day} disagrees on {len(on_day)} pod(s) (credential {credential.name})",
            text=(
                f"On {day} (UTC) Lium's statement debited ${theirs:.2f} for {len(on_day)} pod(s) of credential "
                f"{credential.name} where our cost is ${ours:.2f} (a difference of ${theirs - ours:+.2f}). "
                "Usage lines of those days stay estimates until the two agree."
            ),
            data=_mismatch_data(credential, day, on_day),
            now=now,
        )


def _mismatch_data(credential: UpstreamCredential, day: date, lines: list[StatementLine]) -> dict[str, Any]:
    return {
        "credential": credential.name,
        "day": day.isoformat(),
        "pods": [
            {"pod_id": line.pod_id, "ours_usd": f"{line.ours_usd:.4f}", "lium_usd": f"{line.lium_usd or 0:.4f}"}
            for line in lines[:50]
        ],
    }


def statements_compare_all(*, now: datetime | None = None, days: int | None = None) -> list[CheckResult]:
    """Compare the previous STATEMENT_CHECK_DAYS (or `days`) UTC days of every active credential."""
    now = now or timezone.now()
    checked = previous_days(now, days or settings.STATEMENT_CHECK_DAYS)
    return [
        statement_compare(credential=credential, days=checked, now=now)
        for credential in UpstreamCredential.objects.filter(active=True).order_by("pk")
    ]


def pod_listing_receiver(sender: Any, *, credential_id: int, refused: str, **kwargs: Any) -> None:
    """Answer `rentals.signals.pod_listing_read`: a refused listing opens a notice, a read one closes it."""
    now = timezone.now()
    key = str(credential_id)
    if not refused:
        notice_resolve(kind=LISTING_REFUSED, key=key, now=now)
        return
    name = UpstreamCredential.objects.filter(pk=credential_id).values_list("name", flat=True).first() or key
    notice_raise(
        kind=LISTING_REFUSED,
        key=key,
        credential_id=credential_id,
        subject=f"Pod listing of credential {name} refused: its clusters are not tracked",
        text=(
            f"The pod listing of credential {name} was refused: {refused} Until a listing reads again, its "
            "clusters' members are not followed (ready, degraded, terminated). A listing past POD_LISTING_MAX_PODS "
            "needs that setting raised."
        ),
        data={"credential": name, "reason": refused[:500]},
        now=now,
    )


PANEL_DAYS = 14
PANEL_LIMIT = 50


def statement_panel_context(*, now: datetime | None = None) -> dict[str, Any]:
    """The ops overview's notices and disagreeing pod-days (3 queries)."""
    now = now or timezone.now()
    since = now.astimezone(UTC).date() - timedelta(days=PANEL_DAYS)
    disagreeing = (
        StatementLine.objects.filter(agrees=False, day__gte=since)
        .select_related("credential", "rental")
        .order_by("-day", "pod_id")[:PANEL_LIMIT]
    )
    return {
        "notices": list(OperatorNotice.objects.filter(resolved_at__isnull=True).order_by("-at")[:PANEL_LIMIT]),
        "disagreeing": list(disagreeing),
        "checked": StatementLine.objects.order_by("-checked_at").values_list("checked_at", flat=True).first(),
        "window_days": PANEL_DAYS,
        "limit": PANEL_LIMIT,
    }
