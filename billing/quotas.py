"""Quotas per customer: at most G GPUs at once, C active clusters, $H per hour (`CustomerQuota`).

Operators set them (beside the budget, on the team page); a customer's admins may set lower ones for their team.
The check answers `rentals.signals.order_checking`, sent by the submit service with the customer row locked, so
two orders at once cannot both slip under a quota. What counts is every rental that bills or may bill.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from accounts.models import Customer
from billing.models import CustomerQuota
from rentals.selectors import customer_active_rentals, customer_gpus_in_use, customer_hourly_spend

# name → how a person reads it; the names are the API's and the model's (`max_<name>`, `own_max_<name>`).
QUOTA_LABELS = {"gpus": "GPUs at once", "clusters": "active clusters", "hourly_usd": "USD per hour"}
QUOTA_CODE = "quota_exceeded"


@dataclass(frozen=True)
class QuotaLine:
    """One quota that applies, what is used of it and what is left."""

    name: str
    limit: Decimal | int
    used: Decimal | int

    @property
    def label(self) -> str:
        return QUOTA_LABELS[self.name]

    @property
    def left(self) -> Decimal | int:
        return max(self.limit - self.used, 0)

    def shown(self, value: Decimal | int) -> str:
        return f"${value:.2f}" if self.name == "hourly_usd" else str(value)

    @property
    def shown_used(self) -> str:
        return self.shown(self.used)

    @property
    def shown_limit(self) -> str:
        return self.shown(self.limit)

    @property
    def shown_left(self) -> str:
        return self.shown(self.left)


class QuotaExceeded(ValidationError):
    """An order refused by a quota: `params` carries the quota, its limit, the usage and what the order adds."""

    def __init__(self, line: QuotaLine, adding: Decimal | int, customer: Customer) -> None:
        message = (
            f"Quota of {line.label} reached: this order adds {line.shown(adding)} to {customer.name}'s "
            f"{line.shown(line.used)} in use, above its quota of {line.shown(line.limit)} {line.label}. "
            "Terminate a cluster, order less, or ask for a higher quota."
        )
        super().__init__(message, code=QUOTA_CODE)
        self.details = {
            "quota": line.name,
            "limit": str(line.limit),
            "usage": str(line.used),
            "adding": str(adding),
        }


def quota_for(customer: Customer) -> CustomerQuota:
    """Return the customer's quotas (an unsaved empty row when none were set)."""
    return CustomerQuota.objects.filter(customer=customer).first() or CustomerQuota(customer=customer)


def quota_lines(*, customer: Customer) -> list[QuotaLine]:
    """Return the quotas that apply to the customer with what is in use now (none set: an empty list)."""
    quota = quota_for(customer)
    usage: dict[str, Callable[[], Decimal | int]] = {
        "gpus": lambda: customer_gpus_in_use(customer=customer),
        "clusters": lambda: customer_active_rentals(customer=customer).count(),
        "hourly_usd": lambda: customer_hourly_spend(customer=customer),
    }
    lines = []
    for name, used in usage.items():
        limit = quota.effective(name)
        if limit is not None:
            lines.append(QuotaLine(name=name, limit=limit, used=used()))
    return lines


def quota_check(*, customer: Customer, adding_gpus: int, adding_per_hour: Decimal) -> None:
    """Refuse (QuotaExceeded) an order that would take the customer above any of its quotas."""
    adding: dict[str, Decimal | int] = {"gpus": adding_gpus, "clusters": 1, "hourly_usd": adding_per_hour}
    for line in quota_lines(customer=customer):
        if line.used + adding[line.name] > line.limit:
            raise QuotaExceeded(line, adding[line.name], customer)


def quota_check_receiver(
    sender: Any, *, customer: Customer, adding_per_hour: Decimal, adding_gpus: int = 0, **kwargs: Any
) -> None:
    """Answer `rentals.signals.order_checking`: raise to refuse the order."""
    quota_check(customer=customer, adding_gpus=adding_gpus, adding_per_hour=adding_per_hour)


def quota_set_by_operator(
    *, customer: Customer, max_gpus: int | None, max_clusters: int | None, max_hourly_usd: Decimal | None
) -> CustomerQuota:
    """Set the operators' quotas; a team's own quota above a new operator's one is dropped (it would not bind)."""
    quota, _ = CustomerQuota.objects.get_or_create(customer=customer)
    for name, value in (("gpus", max_gpus), ("clusters", max_clusters), ("hourly_usd", max_hourly_usd)):
        setattr(quota, f"max_{name}", value)
        own = getattr(quota, f"own_max_{name}")
        if value is not None and own is not None and own > value:
            setattr(quota, f"own_max_{name}", None)
    quota.save()
    return quota


def quota_set_by_customer(
    *,
    customer: Customer,
    own_max_gpus: int | None,
    own_max_clusters: int | None,
    own_max_hourly_usd: Decimal | None,
) -> CustomerQuota:
    """Set the team's own quotas; each may only be at or below the operators' one (ValidationError naming it)."""
    quota, _ = CustomerQuota.objects.get_or_create(customer=customer)
    wanted = {"gpus": own_max_gpus, "clusters": own_max_clusters, "hourly_usd": own_max_hourly_usd}
    errors = {}
    for name, value in wanted.items():
        ceiling = getattr(quota, f"max_{name}")
        if value is not None and ceiling is not None and value > ceiling:
            shown = QuotaLine(name=name, limit=ceiling, used=0).shown(ceiling)
            errors[f"own_max_{name}"] = ValidationError(
                f"Your quota of {QUOTA_LABELS[name]} can be at most the operators' {shown}; ask an operator to "
                "raise theirs.",
                code="above_operator_quota",
            )
    if errors:
        raise ValidationError(errors)
    for name, value in wanted.items():
        setattr(quota, f"own_max_{name}", value)
    quota.save()
    return quota
