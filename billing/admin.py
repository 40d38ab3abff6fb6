"""The billing models in the Django admin. A budget changes through the operators' service (the team page's rule:
a customer's own budget above the new one is dropped, and stays theirs to set). What billing recorded (threshold
alerts, balance readings, runway alerts) and the team's rows (its admins, invitations) are read-only here: a change
would lie about what happened, or skip what the team page does with it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from billing.forms import OperatorBudgetForm
from billing.models import (
    BalanceReading,
    BudgetAlert,
    CustomerAdmin,
    CustomerBudget,
    Invitation,
    OperatorNotice,
    RunwayAlert,
    StatementLine,
)
from billing.services import budget_set_by_operator
from common.read_only_admin import RecordAdmin


class CustomerBudgetAdminForm(forms.ModelForm):
    # The team page's fields, with their bounds and messages.
    monthly_budget_usd = OperatorBudgetForm.base_fields["monthly_budget_usd"]
    enforce = OperatorBudgetForm.base_fields["enforce"]
    grace_hours = OperatorBudgetForm.base_fields["grace_hours"]

    class Meta:
        model = CustomerBudget
        fields = ["customer", "monthly_budget_usd", "enforce", "grace_hours"]


@admin.register(CustomerBudget)
class CustomerBudgetAdmin(admin.ModelAdmin):
    form = CustomerBudgetAdminForm
    list_display = ["customer", "monthly_budget_usd", "customer_budget_usd", "enforce", "grace_hours", "updated_at"]
    list_select_related = ["customer"]
    search_fields = ["customer__name"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting would also drop the customer admins' own budget, with no record of who did it.
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["customer_budget_usd", "updated_at", *(["customer"] if obj is not None else [])]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        saved = budget_set_by_operator(
            customer=obj.customer,
            monthly_budget_usd=obj.monthly_budget_usd,
            enforce=obj.enforce,
            grace_hours=obj.grace_hours,
        )
        obj.pk, obj.customer_budget_usd, obj.updated_at = saved.pk, saved.customer_budget_usd, saved.updated_at


@admin.register(BudgetAlert)
class BudgetAlertAdmin(RecordAdmin):
    list_display = ["customer", "month", "threshold_pct", "spent_usd", "budget_usd", "at", "terminated_at"]
    list_filter = ["threshold_pct", "month"]
    list_select_related = ["customer"]
    search_fields = ["customer__name"]


@admin.register(BalanceReading)
class BalanceReadingAdmin(RecordAdmin):
    list_display = ["credential", "at", "balance_usd", "hourly_cost_usd", "runway_hours", "error"]
    list_filter = ["credential"]
    list_select_related = ["credential"]


@admin.register(RunwayAlert)
class RunwayAlertAdmin(RecordAdmin):
    list_display = ["credential", "at", "balance_usd", "runway_hours", "resolved_at", "webhook_status", "emailed_at"]
    list_filter = ["credential"]
    list_select_related = ["credential"]


@admin.register(StatementLine)
class StatementLineAdmin(RecordAdmin):
    list_display = ["day", "credential", "pod_id", "rental", "ours_usd", "lium_usd", "agrees", "checked_at"]
    list_filter = ["agrees", "credential"]
    list_select_related = ["credential", "rental"]
    search_fields = ["pod_id"]


@admin.register(OperatorNotice)
class OperatorNoticeAdmin(RecordAdmin):
    list_display = ["at", "kind", "credential", "subject", "resolved_at", "webhook_status", "emailed_at"]
    list_filter = ["kind", "credential"]
    list_select_related = ["credential"]


@admin.register(CustomerAdmin)
class CustomerAdminAdmin(RecordAdmin):
    list_display = ["membership", "created_at"]
    list_select_related = ["membership__user", "membership__customer"]
    search_fields = ["membership__user__username", "membership__customer__name"]


@admin.register(Invitation)
class InvitationAdmin(RecordAdmin):
    list_display = ["customer", "role", "created_by", "created_at", "expires_at", "used_by", "revoked_at"]
    list_filter = ["role"]
    list_select_related = ["customer", "created_by", "used_by"]
    exclude = ["token_sha256"]
