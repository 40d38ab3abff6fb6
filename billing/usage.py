"""Cost so far: one line per rental, clipped to a month: its pods as Lium bills them, or rented to terminated.

A rental whose members ran costs what its pods billed (`billing.pod_cost`: each pod per second at its own
price, from RUNNING until its removal started); one none of whose members has run (or was listed) costs from
rented to terminated at the order's price. This one selector feeds the usage page, its CSV and
`GET /api/v1/usage`, so the three agree to the cent. Money is Decimal throughout; each line's cost is rounded
to cents once, at the end, and the total is the sum of the rounded lines (what a reader adds up is what the
total says). A line is `confirmed` when Lium's statement agreed with our cost of each of its pods on every day
of it (`billing.statement`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from accounts.models import Customer
from billing.models import StatementLine
from billing.pod_cost import PodSpan, rental_pods
from rentals.models import Rental, RentalEvent
from rentals.states import RentalStatus

CENT = Decimal("0.01")
HOURS_PLACES = Decimal("0.0001")
MONTH_RE = re.compile(r"\A(\d{4})-(0[1-9]|1[0-2])\Z")


@dataclass(frozen=True)
class Month:
    """A calendar month in UTC: [start, end)."""

    year: int
    month: int

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return datetime(self.year + self.month // 12, self.month % 12 + 1, 1, tzinfo=UTC)

    @classmethod
    def of(cls, moment: datetime) -> Month:
        moment = moment.astimezone(UTC)
        return cls(moment.year, moment.month)

    @classmethod
    def parse(cls, text: str) -> Month:
        """Parse `YYYY-MM`; raise ValueError with a message a person can act on."""
        match = MONTH_RE.match(text or "")
        if match is None:
            raise ValueError(f"Give the month as YYYY-MM (for example {Month.of(timezone.now()).label}).")
        month = cls(int(match.group(1)), int(match.group(2)))
        # Its first day and the next month's must be dates (years 1 to 9999).
        if not Month(1, 1).label <= month.label <= Month(9999, 11).label:
            raise ValueError("Give a month from 0001-01 to 9999-11.")
        return month


@dataclass(frozen=True)
class UsageLine:
    rental_id: str
    pod_name: str
    customer_id: int
    customer_name: str
    customer_ref: str
    status: str
    started: datetime  # within the month: when it was rented, or the month's start
    ended: datetime | None  # within the month: terminated, or the month's end; None while it still runs
    hours: Decimal
    price_per_hour: Decimal
    cost_usd: Decimal
    # True while the cluster still runs (cost so far) or when its price was not known at order time.
    estimate: bool
    # True when Lium's statement agreed (within a cent) with each of its pods on every day of the line.
    confirmed: bool = False


@dataclass(frozen=True)
class UsageReport:
    month: Month
    lines: list[UsageLine]
    total_usd: Decimal
    as_of: datetime

    @property
    def has_estimates(self) -> bool:
        return any(line.estimate for line in self.lines)


def with_terminated_at(rentals: QuerySet[Rental]) -> QuerySet[Rental]:
    """Annotate each rental with when it became `terminated` (the state change on its timeline)."""
    ended = RentalEvent.objects.filter(rental_id=OuterRef("pk"), to_status=RentalStatus.TERMINATED).order_by("at")
    return rentals.annotate(terminated_at=Subquery(ended.values("at")[:1]))


def usage_report(*, rentals: QuerySet[Rental], month: Month, now: datetime | None = None) -> UsageReport:
    """Return the month's cost lines of these (already scoped) rentals and their total, up to `now`."""
    now = now or timezone.now()
    period_end = min(month.end, now)
    billed = (
        with_terminated_at(rentals.filter(rented_at__isnull=False, rented_at__lt=period_end))
        .filter(Q(terminated_at__isnull=True) | Q(terminated_at__gt=month.start))
        .select_related("customer")
        .order_by("rented_at", "id")
    )
    rentals_billed = list(billed)
    pods = rental_pods(rentals_billed, now=now)
    lines = []
    for rental in rentals_billed:
        spans = pods.spans.get(rental.pk)
        line = _line(rental, month, period_end) if spans is None else _pods_line(rental, spans, month, period_end)
        if line is not None:
            lines.append(line)
    lines = _with_confirmation(lines, {str(rental.public_id): rental.pk for rental in rentals_billed})
    return UsageReport(month=month, lines=lines, total_usd=sum((x.cost_usd for x in lines), Decimal(0)), as_of=now)


def _line(rental: Rental, month: Month, period_end: datetime) -> UsageLine | None:
    assert rental.rented_at is not None  # filtered on
    terminated_at: datetime | None = rental.terminated_at  # type: ignore[attr-defined]
    started = max(rental.rented_at, month.start)
    stop = min(terminated_at, period_end) if terminated_at is not None else period_end
    if stop <= started:
        return None
    seconds = Decimal((stop - started).total_seconds())
    price = rental.price_per_hour or Decimal(0)
    hours = seconds / Decimal(3600)
    if terminated_at is not None and terminated_at <= period_end:
        ended: datetime | None = terminated_at
    elif period_end == month.end:
        ended = month.end  # a past month: the cluster ran on past its end
    else:
        ended = None  # still running: the cost so far
    return _usage_line(rental, started=started, ended=ended, hours=hours, price=price, cost=hours * price)


def _pods_line(rental: Rental, spans: list[PodSpan], month: Month, period_end: datetime) -> UsageLine | None:
    """The line of a rental whose pods are known: what they billed within the month (none billed: no line)."""
    ran = [span for span in spans if span.seconds_within(month.start, period_end) > 0]
    if not ran:
        return None
    price = rental.price_per_hour or sum((span.price for span in spans), Decimal(0))
    cost = sum((span.cost_within(month.start, period_end) for span in ran), Decimal(0))
    stops = [span.stop for span in spans]
    if all(stop is not None and stop <= period_end for stop in stops):
        ended: datetime | None = max(stop for stop in stops if stop is not None)
    elif period_end == month.end:
        ended = month.end  # a past month: the cluster ran on past its end
    else:
        ended = None  # still running: the cost so far
    started = max(min(span.start for span in ran), month.start)
    # The hours at the order's price that make the cost (each pod's own hours when all ran alike).
    hours = cost / price if price else Decimal(0)
    return _usage_line(rental, started=started, ended=ended, hours=hours, price=price, cost=cost)


def _usage_line(
    rental: Rental, *, started: datetime, ended: datetime | None, hours: Decimal, price: Decimal, cost: Decimal
) -> UsageLine:
    """One rental's usage line, rounded as every line is (an open line, or one at no price, is an estimate)."""
    return UsageLine(
        rental_id=str(rental.public_id),
        pod_name=rental.pod_name,
        customer_id=rental.customer_id,
        customer_name=rental.customer.name,
        customer_ref=rental.customer_ref or "",
        status=rental.status,
        started=started,
        ended=ended,
        hours=hours.quantize(HOURS_PLACES, rounding=ROUND_HALF_UP),
        price_per_hour=price,
        cost_usd=cost.quantize(CENT, rounding=ROUND_HALF_UP),
        estimate=ended is None or price == 0,
    )


def _with_confirmation(lines: list[UsageLine], rental_pks: dict[str, int]) -> list[UsageLine]:
    """Mark the ended lines whose every day has statement lines, all agreeing (one query)."""
    ended = [line for line in lines if line.ended is not None and not line.estimate]
    if not ended:
        return lines
    first = min(line.started for line in ended).date()
    checked = StatementLine.objects.filter(
        rental_id__in=[rental_pks[line.rental_id] for line in ended], day__gte=first
    ).values_list("rental_id", "day", "agrees")
    agreeing: dict[int, set[date]] = {}
    disagreeing: set[tuple[int, date]] = set()
    for rental_id, day, agrees in checked:
        agreeing.setdefault(rental_id, set()).add(day)
        if not agrees:
            disagreeing.add((rental_id, day))
    marked = []
    ended_ids = {line.rental_id for line in ended}
    for line in lines:
        pk = rental_pks[line.rental_id]
        days = _days_of(line) if line.rental_id in ended_ids else set()
        confirmed = bool(days) and days <= agreeing.get(pk, set()) and not any((pk, d) in disagreeing for d in days)
        marked.append(replace(line, confirmed=True) if confirmed else line)
    return marked


def _days_of(line: UsageLine) -> set[date]:
    """The UTC days the line's time touches."""
    assert line.ended is not None
    last = (line.ended - timedelta(microseconds=1)).date()
    day, days = line.started.date(), set()
    while day <= last:
        days.add(day)
        day += timedelta(days=1)
    return days


def month_to_date_usd(*, customer: Customer | int, now: datetime | None = None) -> Decimal:
    """Return what the customer's rentals cost this month so far (the sum of its usage lines)."""
    now = now or timezone.now()
    customer_id = customer if isinstance(customer, int) else customer.pk
    report = usage_report(rentals=Rental.objects.filter(customer_id=customer_id), month=Month.of(now), now=now)
    return report.total_usd
