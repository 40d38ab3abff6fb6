"""The billing models in the Django admin: budgets change through the operators' service; what billing recorded
(alerts, balance readings, runway alerts) and the team's rows (admins, invitations) are read-only there."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from billing.models import BalanceReading, BudgetAlert, CustomerBudget, RunwayAlert
from billing.services import budget_set_by_customer, budget_set_by_operator
from tests.conftest import _user

pytestmark = pytest.mark.django_db

READ_ONLY = [
    *("budgetalert", "balancereading", "runwayalert", "invitation", "customeradmin"),
    *("statementline", "operatornotice"),
]


@pytest.fixture
def root(client_for):  # type: ignore[no-untyped-def]
    return client_for(_user("root", superuser=True))


def test_every_billing_model_is_listed(root) -> None:
    html = root.get("/admin/billing/").content.decode()
    for name in (
        *("Customer budgets", "Budget alerts", "Balance readings", "Runway alerts", "Invitations"),
        *("Statement lines", "Operator notices"),
    ):
        assert name in html
    assert "Customer admins" in html


def test_recorded_rows_cannot_be_added_or_changed(root, acme, credential) -> None:
    now = timezone.now()
    alert = BudgetAlert.objects.create(
        customer=acme, month="2030-06", threshold_pct=80, spent_usd=Decimal(80), budget_usd=Decimal(100), at=now
    )
    reading = BalanceReading.objects.create(credential=credential, at=now, balance_usd=Decimal(5))
    runway = RunwayAlert.objects.create(
        credential=credential, at=now, balance_usd=Decimal(5), hourly_cost_usd=Decimal(1), runway_hours=Decimal(5)
    )
    for model in READ_ONLY:
        assert root.get(f"/admin/billing/{model}/add/").status_code == 403, model
    for model, row in (("budgetalert", alert), ("balancereading", reading), ("runwayalert", runway)):
        page = root.get(f"/admin/billing/{model}/{row.pk}/change/")
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode(), model
        assert root.post(f"/admin/billing/{model}/{row.pk}/change/", {}).status_code == 403, model
    alert.refresh_from_db()
    assert alert.spent_usd == Decimal(80)


def test_a_budget_changed_in_the_admin_follows_the_operators_rule(root, acme) -> None:
    budget_set_by_operator(customer=acme, monthly_budget_usd=Decimal(500), enforce=False, grace_hours=24)
    budget_set_by_customer(customer=acme, customer_budget_usd=Decimal(400))
    budget = CustomerBudget.objects.get()
    page = root.get(f"/admin/billing/customerbudget/{budget.pk}/change/").content.decode()
    assert 'name="customer_budget_usd"' not in page, "the customer's own budget is theirs to set"
    response = root.post(
        f"/admin/billing/customerbudget/{budget.pk}/change/",
        {"customer": acme.pk, "monthly_budget_usd": "300", "enforce": "on", "grace_hours": "12"},
    )
    assert response.status_code == 302
    budget.refresh_from_db()
    assert (budget.monthly_budget_usd, budget.enforce, budget.grace_hours) == (Decimal(300), True, 12)
    assert budget.customer_budget_usd is None, "a customer budget above the operators' new one is dropped"


def test_a_budget_cannot_be_deleted_in_the_admin(root, acme) -> None:
    budget = budget_set_by_operator(customer=acme, monthly_budget_usd=Decimal(500), enforce=True, grace_hours=2)
    assert root.get(f"/admin/billing/customerbudget/{budget.pk}/delete/").status_code == 403
    assert root.post(f"/admin/billing/customerbudget/{budget.pk}/delete/", {"post": "yes"}).status_code == 403
    assert CustomerBudget.objects.filter(pk=budget.pk).exists()
