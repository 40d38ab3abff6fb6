"""What each pod of ours cost, billed as Lium bills it: the rule behind usage lines and the statement check.

A pod is a rental's member (`ClusterMember`, the same `pod_id` as on Lium's pod listing and statement). It bills
per second at its own price (its pod row's `price`, docs/upstream-api.md §8) from when it started RUNNING
(`running_since`: the row's `updated_at` when first listed RUNNING) until its removal started: the accepted
DELETE of its cluster, its scheduled removal once passed, when a listing first missed it (`gone_at`), or the
rental's end, whichever came first. A pod that never ran costs nothing. A rental none of whose members has
run yet (or was ever listed) has no spans here: `billing.usage` then bills it from rented to terminated at the
order's price, as before (an upper bound, and an estimate until it ends).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Min

from rentals.models import ClusterMember, Rental, RentalEvent

HOUR = Decimal(3600)


@dataclass(frozen=True)
class PodSpan:
    """When one pod billed, at what price per hour; `stop` None while it still bills."""

    pod_id: str
    rental_id: int
    start: datetime
    stop: datetime | None
    price: Decimal

    def seconds_within(self, start: datetime, end: datetime) -> Decimal:
        """Return the seconds it billed within [start, end)."""
        stop = end if self.stop is None else min(self.stop, end)
        begin = max(self.start, start)
        return Decimal((stop - begin).total_seconds()) if stop > begin else Decimal(0)

    def cost_within(self, start: datetime, end: datetime) -> Decimal:
        """Return what it cost within [start, end), unrounded."""
        return self.seconds_within(start, end) * self.price / HOUR


@dataclass(frozen=True)
class RentalPods:
    """The pods that ran, per rental (a rental none of whose pods ran is absent), and every listed pod's rental."""

    spans: dict[int, list[PodSpan]]
    pod_rentals: dict[str, int]  # every listed member's pod id -> its rental, whether it ran or not

    def known(self, rental_id: int) -> bool:
        return rental_id in self.spans


def rental_pods(rentals: Iterable[Rental], *, now: datetime) -> RentalPods:
    """Return each rental's pod spans (two queries). A rental may carry `terminated_at` (usage's annotation)."""
    by_id = {rental.pk: rental for rental in rentals}
    if not by_id:
        return RentalPods(spans={}, pod_rentals={})
    accepted = dict(
        RentalEvent.objects.filter(rental_id__in=by_id, kind=RentalEvent.Kind.MEMBER, data__delete_accepted=True)
        .order_by()
        .values("rental_id")
        .annotate(first=Min("at"))
        .values_list("rental_id", "first")
    )
    members = ClusterMember.objects.filter(rental_id__in=by_id).order_by("rental_id", "rank", "pod_id")
    spans: dict[int, list[PodSpan]] = defaultdict(list)
    pod_rentals: dict[str, int] = {}
    for member in members.only("rental_id", "pod_id", "running_since", "gone_at", "price_per_hour"):
        rental = by_id[member.rental_id]
        pod_rentals[member.pod_id] = rental.pk
        if member.running_since is None:
            continue
        ends = [member.gone_at, accepted.get(rental.pk), getattr(rental, "terminated_at", None)]
        if rental.removal_scheduled_at is not None and rental.removal_scheduled_at <= now:
            ends.append(rental.removal_scheduled_at)
        stop = min((end for end in ends if end is not None), default=None)
        spans[rental.pk].append(
            PodSpan(
                pod_id=member.pod_id,
                rental_id=rental.pk,
                start=member.running_since,
                stop=None if stop is None else max(stop, member.running_since),
                price=member.price_per_hour,
            )
        )
    return RentalPods(spans=dict(spans), pod_rentals=pod_rentals)


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """Return the UTC day as [start, end)."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def pod_day_costs(spans: Iterable[PodSpan], days: Iterable[date], *, now: datetime) -> dict[tuple[str, date], Decimal]:
    """Return each pod's cost per UTC day (only pod-days it billed), up to `now`."""
    costs: dict[tuple[str, date], Decimal] = {}
    bounds = [(day, *day_bounds(day)) for day in days]
    for span in spans:
        for day, start, end in bounds:
            seconds = span.seconds_within(start, min(end, now))
            if seconds > 0:
                costs[span.pod_id, day] = seconds * span.price / HOUR
    return costs
