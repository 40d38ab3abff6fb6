"""Reads for the money pages, scoped like every other read: members their customers, staff every customer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from allauth.mfa.models import Authenticator
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404
from django.utils import timezone

from accounts.models import Customer, Membership
from accounts.roles import is_staff_reader
from billing.models import CustomerBudget, Invitation
from billing.usage import Month, UsageReport, month_to_date_usd, usage_report
from rentals.models import Rental
from rentals.selectors import rental_list_for_user


def customers_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Customer]:
    """Return the customers whose money the user may read: staff every customer, members their own."""
    if is_staff_reader(user):
        return Customer.objects.all()
    if not user.is_authenticated:
        return Customer.objects.none()
    return Customer.objects.filter(memberships__user_id=user.pk)


def customer_get_for_user(*, user: AbstractBaseUser | AnonymousUser, customer_id: int) -> Customer:
    """Return one customer the user may read, or raise Http404 (its existence is not revealed)."""
    customer = customers_for_user(user=user).filter(pk=customer_id).first()
    if customer is None:
        raise Http404("No such customer.")
    return customer


def usage_for_user(
    *,
    user: AbstractBaseUser | AnonymousUser,
    month: Month,
    customer: Customer | None = None,
    now: datetime | None = None,
) -> UsageReport:
    """Return the month's usage lines the user may see (optionally one customer's): page, CSV and API alike."""
    rentals: QuerySet[Rental] = rental_list_for_user(user=user)
    if customer is not None:
        rentals = rentals.filter(customer=customer)
    return usage_report(rentals=rentals.distinct(), month=month, now=now)


@dataclass(frozen=True)
class BudgetStatus:
    customer: Customer
    month: str
    spent_usd: Decimal
    operator_budget_usd: Decimal | None
    customer_budget_usd: Decimal | None
    budget_usd: Decimal | None
    pct: int | None
    enforce: bool
    grace_hours: int

    @property
    def reached(self) -> bool:
        return self.pct is not None and self.pct >= 100


def budget_status(*, customer: Customer, now: datetime | None = None) -> BudgetStatus:
    """Return the customer's month-to-date spend against its budget."""
    now = now or timezone.now()
    budget = CustomerBudget.objects.filter(customer=customer).first() or CustomerBudget(customer=customer)
    spent = month_to_date_usd(customer=customer, now=now)
    limit = budget.effective_usd
    pct = int(spent * 100 / limit) if limit else None
    return BudgetStatus(
        customer=customer,
        month=Month.of(now).label,
        spent_usd=spent,
        operator_budget_usd=budget.monthly_budget_usd,
        customer_budget_usd=budget.customer_budget_usd,
        budget_usd=limit,
        pct=pct,
        enforce=budget.enforce,
        grace_hours=budget.grace_hours,
    )


def team_members(*, customer: Customer) -> QuerySet[Membership]:
    """The customer's memberships by username, each with `has_totp`: whether the member has an authenticator app."""
    totp = Authenticator.objects.filter(user_id=OuterRef("user_id"), type=Authenticator.Type.TOTP)
    members = Membership.objects.filter(customer=customer).select_related("user", "admin_role")
    return members.annotate(has_totp=Exists(totp)).order_by("user__username")


def open_invitations(*, customer: Customer, now: datetime | None = None) -> QuerySet[Invitation]:
    now = now or timezone.now()
    return Invitation.objects.filter(
        customer=customer, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
    ).select_related("created_by")
