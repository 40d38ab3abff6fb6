"""The admin of customers' removal policies: a change is checked and saved by `rentals.removal.policy`, the rule
the policy page (`/customers/<id>/removal-policy/`) uses, and records who made it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from rentals.models import CustomerRemovalPolicy
from rentals.removal.policy import removal_policy_check, removal_policy_set


class CustomerRemovalPolicyForm(forms.ModelForm):
    class Meta:
        model = CustomerRemovalPolicy
        fields = ["customer", "default_hours", "max_hours"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            removal_policy_check(default_hours=data.get("default_hours"), max_hours=data.get("max_hours"))
        except ValidationError as exc:
            self.add_error(None, exc)  # keyed by field: each message lands on its field
        return data


@admin.register(CustomerRemovalPolicy)
class CustomerRemovalPolicyAdmin(admin.ModelAdmin):
    form = CustomerRemovalPolicyForm
    list_display = ["customer", "default_hours", "max_hours", "updated_at", "updated_by"]
    list_select_related = ["customer", "updated_by"]
    search_fields = ["customer__name"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A policy is changed, never deleted, so that every change is recorded with its author.
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A policy belongs to its customer: moving it to another would silently change two customers.
        return ["updated_at", "updated_by", *(["customer"] if obj is not None else [])]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        assert isinstance(request.user, User)  # the admin is behind its staff login
        saved = removal_policy_set(
            customer=obj.customer, default_hours=obj.default_hours, max_hours=obj.max_hours, actor=request.user
        )
        obj.pk, obj.updated_by, obj.updated_at = saved.pk, saved.updated_by, saved.updated_at
