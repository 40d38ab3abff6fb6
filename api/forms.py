"""The profile form that creates an API key."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.utils import timezone

from api.models import ApiKey


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the key is for, e.g. 'CI pipeline'.")
    scopes = forms.MultipleChoiceField(
        choices=ApiKey.Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[ApiKey.Scope.READ],
        error_messages={"required": "Choose at least one scope."},
    )
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=3650,
        help_text="Empty: the key does not expire (revoke it when you no longer need it).",
    )

    def expires_at(self):  # type: ignore[no-untyped-def]
        days = self.cleaned_data.get("expires_in_days")
        return timezone.now() + timedelta(days=days) if days else None
