"""Writes on budgets: set them, refuse an order at 100 %, raise each threshold alert once, enforce.

A month is a calendar month in UTC. Spend is `billing.usage` (rented → terminated at the order's price).

The rule at rent time (`budget_check`, run with the customer row locked, so check and insert are race-free):
an order is refused when the month's spend has reached the budget, or when one more hour of every open
rental of the customer plus this order would take the spend above it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Customer
from billing.models import THRESHOLDS, BudgetAlert, CustomerBudget
from billing.usage import Month, month_to_date_usd
from notifications import events as ev
from notifications.services import event_emit
from rentals.audit import staff_action_record
from rentals.models import Rental
from rentals.selectors import customer_hourly_spend
from rentals.services import rental_terminate
from rentals.states import HOLDS_CLUSTER_STATES

logger = logging.getLogger(__name__)


def budget_for(customer: Customer | int) -> CustomerBudget | None:
    customer_id = customer if isinstance(customer, int) else customer.pk
    return CustomerBudget.objects.filter(customer_id=customer_id).first()


def budget_set_by_operator(
    *, customer: Customer, monthly_budget_usd: Decimal | None, enforce: bool, grace_hours: int
) -> CustomerBudget:
    """Set the operators' budget and enforcement; a customer's own lower budget above the new one is dropped."""
    budget, _ = CustomerBudget.objects.get_or_create(customer=customer)
    budget.monthly_budget_usd = monthly_budget_usd
    budget.enforce = enforce
    budget.grace_hours = grace_hours
    if (
        monthly_budget_usd is not None
        and budget.customer_budget_usd is not None
        and budget.customer_budget_usd > monthly_budget_usd
    ):
        budget.customer_budget_usd = None
    budget.save()
    return budget


def budget_set_by_customer(*, customer: Customer, customer_budget_usd: Decimal | None) -> CustomerBudget:
    """Set the customer's own budget; it may only be at or below the operators' budget."""
    budget, _ = CustomerBudget.objects.get_or_create(customer=customer)
    ceiling = budget.monthly_budget_usd
    if customer_budget_usd is not None and ceiling is not None and customer_budget_usd > ceiling:
        raise ValidationError(
            f"Your budget can be at most the operators' budget of ${ceiling:.2f} a month; "
            "ask an operator to raise theirs.",
            code="above_operator_budget",
        )
    if customer_budget_usd is not None and customer_budget_usd < 0:
        raise ValidationError("A budget cannot be negative.", code="negative_budget")
    budget.customer_budget_usd = customer_budget_usd
    budget.save()
    return budget


def budget_check(*, customer: Customer, adding_per_hour: Decimal, now: datetime | None = None) -> None:
    """Refuse (ValidationError) an order of `adding_per_hour` USD/hour when the monthly budget does not allow it."""
    budget = budget_for(customer)
    limit = budget.effective_usd if budget is not None else None
    if limit is None:
        return
    now = now or timezone.now()
    month = Month.of(now).label
    spent = month_to_date_usd(customer=customer, now=now)
    if spent >= limit:
        raise ValidationError(
            f"{customer.name} has reached its monthly budget: ${spent:.2f} spent of ${limit:.2f} in {month} "
            "(100 %). New rentals are refused until next month, or until the budget is raised.",
            code="budget_reached",
        )
    next_hour = customer_hourly_spend(customer=customer) + adding_per_hour
    if spent + next_hour > limit:
        raise ValidationError(
            f"This order (${adding_per_hour:.2f}/hour) would take {customer.name} past its monthly budget within "
            f"the hour: ${spent:.2f} spent of ${limit:.2f} in {month}, and its clusters with this one cost "
            f"${next_hour:.2f}/hour. Terminate a cluster or ask for a higher budget.",
            code="budget_would_exceed",
        )


def budget_check_receiver(sender: Any, *, customer: Customer, adding_per_hour: Decimal, **kwargs: Any) -> None:
    """Answer `rentals.signals.order_checking`: raise to refuse the order."""
    budget_check(customer=customer, adding_per_hour=adding_per_hour)


# --- Thresholds and enforcement (beat: billing.tasks.budgets_scan) --------------------------------------------


def budgets_scan(*, now: datetime | None = None) -> int:
    """Raise every threshold crossed this month once, and enforce where it is on; return alerts raised."""
    now = now or timezone.now()
    raised = 0
    for budget in CustomerBudget.objects.select_related("customer").filter(customer__active=True):
        if budget.effective_usd is None:
            continue
        raised += budget_alerts_raise(budget=budget, now=now)
        budget_enforce(budget=budget, now=now)
    return raised


def _threshold_data(customer: Customer, month: str, pct: int, spent: Decimal, limit: Decimal) -> dict[str, Any]:
    return {
        "customer_ref": customer.customer_ref,
        "month": month,
        "threshold_pct": pct,
        "spent_usd": f"{spent:.2f}",
        "budget_usd": f"{limit:.2f}",
    }


def budget_alerts_raise(*, budget: CustomerBudget, now: datetime) -> int:
    """Write and emit `budget.threshold` for each of 80, 90, 100 % crossed and not yet raised this month."""
    limit = budget.effective_usd
    if limit is None or limit <= 0:
        return 0
    customer = budget.customer
    month = Month.of(now).label
    spent = month_to_date_usd(customer=customer, now=now)
    raised = 0
    for pct in THRESHOLDS:
        if spent * 100 < limit * pct:
            break
        try:
            with transaction.atomic():
                alert = BudgetAlert.objects.create(
                    customer=customer, month=month, threshold_pct=pct, spent_usd=spent, budget_usd=limit, at=now
                )
                data = _threshold_data(customer, month, pct, spent, limit)
                if pct == 100:
                    data["enforcement"] = _enforcement_info(budget, alert, now)
                event_emit(
                    customer=customer,
                    type=ev.BUDGET_THRESHOLD,
                    data=data,
                    dedup_key=f"budget:{customer.pk}:{month}:{pct}",
                )
        except IntegrityError:
            continue  # raised before (this month's row exists)
        if pct == 100 and alert.terminate_after is not None:
            _warn_running(customer, _warning(spent, limit, month, budget.grace_hours))
        logger.info("Budget of %s: %s %% reached in %s (%s of %s USD).", customer.name, pct, month, spent, limit)
        raised += 1
    return raised


def _enforcement_info(budget: CustomerBudget, alert: BudgetAlert, now: datetime) -> dict[str, Any]:
    """Start the grace period on the 100 % alert if enforcement is on; return what the event says about it."""
    if not budget.enforce:
        return {"enabled": False}
    alert.terminate_after = now + timedelta(hours=budget.grace_hours)
    alert.save(update_fields=["terminate_after"])
    return {"enabled": True, "grace_hours": budget.grace_hours, "terminate_after": alert.terminate_after.isoformat()}


def budget_enforce(*, budget: CustomerBudget, now: datetime) -> int:
    """With enforcement on and the budget still spent: warn first, then terminate after the grace; return count."""
    limit = budget.effective_usd
    if not budget.enforce or limit is None:
        return 0
    customer = budget.customer
    month = Month.of(now).label
    alert = BudgetAlert.objects.filter(customer=customer, month=month, threshold_pct=100).first()
    if alert is None:
        return 0  # not at 100 % yet (budget_alerts_raise writes this row first)
    spent = month_to_date_usd(customer=customer, now=now)
    if spent < limit:
        return 0  # the budget was raised meanwhile
    if alert.terminate_after is None:
        # Enforcement was switched on after the 100 % alert: this is the warning, the grace starts now.
        with transaction.atomic():
            info = _enforcement_info(budget, alert, now)
            event_emit(
                customer=customer,
                type=ev.BUDGET_THRESHOLD,
                data={**_threshold_data(customer, month, 100, spent, limit), "enforcement": info},
                dedup_key=f"budget:{customer.pk}:{month}:100:enforcement",
            )
        _warn_running(customer, _warning(spent, limit, month, budget.grace_hours))
        return 0
    if now < alert.terminate_after:
        return 0
    return _terminate_all(customer=customer, alert=alert, spent=spent, limit=limit, month=month, now=now)


def _warning(spent: Decimal, limit: Decimal, month: str, grace_hours: int) -> str:
    return (
        f"Budget enforcement warning: ${spent:.2f} of ${limit:.2f} spent in {month}; the clusters will be "
        f"terminated after {grace_hours} h unless the budget is raised."
    )


def _running(customer: Customer) -> list[Rental]:
    return list(Rental.objects.filter(customer=customer, status__in=HOLDS_CLUSTER_STATES).select_related("credential"))


def _warn_running(customer: Customer, message: str) -> None:
    """Put the enforcement warning on every running rental's timeline (and so in the audit log)."""
    for rental in _running(customer):
        staff_action_record(rental_id=rental.pk, actor=None, action="budget_warning", reason=message, message=message)


def _terminate_all(
    *, customer: Customer, alert: BudgetAlert, spent: Decimal, limit: Decimal, month: str, now: datetime
) -> int:
    reason = f"Budget enforcement: ${spent:.2f} of ${limit:.2f} spent in {month}, grace period over."
    terminated = 0
    for rental in _running(customer):
        staff_action_record(rental_id=rental.pk, actor=None, action="budget_terminate", reason=reason, message=reason)
        try:
            with transaction.atomic():
                terminated += rental_terminate(rental=rental, actor=None, reason=reason)
        except ValidationError as exc:
            # No cluster id yet: the next scan tries again.
            staff_action_record(
                rental_id=rental.pk,
                actor=None,
                action="budget_wait",
                reason=reason,
                message=f"Budget enforcement waits: {exc.messages[0]}",
            )
    if alert.terminated_at is None:
        BudgetAlert.objects.filter(pk=alert.pk).update(terminated_at=now)
    if terminated:
        logger.warning("Budget enforcement terminated %s clusters of %s.", terminated, customer.name)
    return terminated
