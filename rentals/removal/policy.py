"""A customer's removal policy, set by operators: the default and the maximum life of its clusters, in hours.

`default_hours` fills an order's `termination_hours` when it names none; `max_hours` refuses a longer one (at
rent time, `rentals.orders.order`), and caps a scheduled removal's distance from now (`rentals.removal.schedule`).
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from accounts.models import Customer
from rentals.models import CustomerRemovalPolicy

MAX_HOURS = 720  # the upstream's own limit on `termination_hours`


def removal_policy_for(customer: Customer | int) -> CustomerRemovalPolicy | None:
    """Return the customer's removal policy, or None when operators set none."""
    customer_id = customer if isinstance(customer, int) else customer.pk
    return CustomerRemovalPolicy.objects.filter(customer_id=customer_id).first()


def removal_policy_apply(*, customer: Customer, hours: int | None) -> int | None:
    """Return the order's `termination_hours` under the customer's policy: its default when none is given,
    refused (ValidationError keyed `termination_hours`) above its maximum."""
    policy = removal_policy_for(customer)
    if policy is None:
        return hours
    if hours is None:
        # A maximum without a default still bounds the cluster's life: the order gets the maximum.
        return policy.default_hours or policy.max_hours
    if policy.max_hours is not None and hours > policy.max_hours:
        message = f"{customer.name}'s clusters are removed after at most {policy.max_hours} hours; enter fewer."
        raise ValidationError({"termination_hours": ValidationError(message, code="over_max_hours")})
    return hours


def removal_policy_check(*, default_hours: int | None, max_hours: int | None) -> None:
    """Refuse (ValidationError keyed by field) hours outside 1-720, or a default above the maximum."""
    for name, value in (("default_hours", default_hours), ("max_hours", max_hours)):
        if value is not None and not 1 <= value <= MAX_HOURS:
            raise ValidationError({name: ValidationError(f"Enter whole hours from 1 to {MAX_HOURS}, or leave empty.")})
    if default_hours is not None and max_hours is not None and default_hours > max_hours:
        raise ValidationError({"default_hours": ValidationError("The default cannot be above the maximum.")})


def removal_policy_set(
    *, customer: Customer, default_hours: int | None, max_hours: int | None, actor: User
) -> CustomerRemovalPolicy:
    """Save the customer's default and maximum (both 1-720 hours or none; the default at most the maximum)."""
    removal_policy_check(default_hours=default_hours, max_hours=max_hours)
    policy, _created = CustomerRemovalPolicy.objects.update_or_create(
        customer=customer,
        defaults={"default_hours": default_hours, "max_hours": max_hours, "updated_by": actor},
    )
    return policy


def removal_policy_summary(policy: CustomerRemovalPolicy | None) -> str:
    """Return the policy in a few words for staff lists ("default 24 h, max 72 h"; "none")."""
    parts = []
    if policy is not None and policy.default_hours:
        parts.append(f"default {policy.default_hours} h")
    if policy is not None and policy.max_hours:
        parts.append(f"max {policy.max_hours} h")
    return ", ".join(parts) or "none"


def removal_policy_summaries(*, customer_ids: list[int]) -> dict[int, str]:
    """Return each customer's policy in a few words, "none" for one without (one query)."""
    found = {p.customer_id: p for p in CustomerRemovalPolicy.objects.filter(customer_id__in=customer_ids)}
    return {customer_id: removal_policy_summary(found.get(customer_id)) for customer_id in customer_ids}


def removal_policy_hint(customer: Customer) -> str:
    """Return the policy as the rent form says it ("" without one)."""
    policy = removal_policy_for(customer)
    if policy is None or (policy.default_hours is None and policy.max_hours is None):
        return ""
    parts = []
    if policy.default_hours or policy.max_hours:
        parts.append(f"empty means {policy.default_hours or policy.max_hours} hours")
    if policy.max_hours:
        parts.append(f"at most {policy.max_hours} hours")
    return f"{customer.name}: " + ", ".join(parts) + " (set by your operator)."
