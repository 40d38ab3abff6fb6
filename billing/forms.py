"""Forms for the money pages."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone

from billing.models import Invitation
from billing.usage import Month

MAX_BUDGET = Decimal("9999999999.99")


def _money(label: str, help_text: str = "") -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        required=False,
        max_digits=12,
        decimal_places=2,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(MAX_BUDGET)],
        help_text=help_text,
    )


class UsageFilterForm(forms.Form):
    month = forms.CharField(required=False, max_length=7, widget=forms.TextInput(attrs={"type": "month"}))
    # The page's CSV link carries the moment the page was computed, so running clusters cost the same in both.
    as_of = forms.DateTimeField(required=False, widget=forms.HiddenInput)
    # Any id is accepted here: the scoped selector answers 404 for a customer the reader may not see.
    customer = forms.IntegerField(required=False, min_value=1, label="Customer", widget=forms.Select)

    def __init__(self, *args: object, customers: list[tuple[int, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["customer"].widget.choices = [("", "All"), *customers]  # type: ignore[attr-defined]

    def clean_month(self) -> Month:
        text = self.cleaned_data.get("month") or ""
        if not text:
            return Month.of(timezone.now())
        try:
            return Month.parse(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_as_of(self) -> datetime | None:
        # In UTC before it reaches the database: PostgreSQL refuses offsets beyond ±15:59 that Python accepts.
        value = self.cleaned_data.get("as_of")
        try:
            return value.astimezone(UTC) if value is not None else None
        except OverflowError as exc:
            raise forms.ValidationError("Give a moment after the year 1 in UTC.") from exc

    def chosen(self) -> tuple[Month, int | None, datetime]:
        """Return the month, customer id and moment asked for (this month, all customers, now for bad input)."""
        now = timezone.now()
        if not self.is_bound:
            return Month.of(now), None, now
        self.is_valid()  # fills cleaned_data with the fields that are valid
        as_of = self.cleaned_data.get("as_of")
        as_of = min(as_of, now) if as_of is not None else now  # never a moment still to come
        return self.cleaned_data.get("month") or Month.of(now), self.cleaned_data.get("customer"), as_of


class OperatorBudgetForm(forms.Form):
    monthly_budget_usd = _money("Monthly budget (USD)", "Empty: no budget.")
    enforce = forms.BooleanField(
        required=False, label="Enforce: terminate this customer's clusters after the grace period at 100 %"
    )
    grace_hours = forms.IntegerField(label="Grace period (hours)", min_value=0, max_value=24 * 31, initial=24)


class CustomerBudgetForm(forms.Form):
    customer_budget_usd = _money("Our own monthly budget (USD)", "At or below the operators' budget; empty: none.")


def _count(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, min_value=0, max_value=1_000_000, help_text=help_text)


class OperatorQuotaForm(forms.Form):
    max_gpus = _count("GPUs at once", "Empty: no quota.")
    max_clusters = _count("Active clusters", "Empty: no quota.")
    max_hourly_usd = _money("USD per hour", "Empty: no quota.")


class CustomerQuotaForm(forms.Form):
    own_max_gpus = _count("Our GPUs at once", "At or below the operators' quota; empty: none.")
    own_max_clusters = _count("Our active clusters", "At or below the operators' quota; empty: none.")
    own_max_hourly_usd = _money("Our USD per hour", "At or below the operators' quota; empty: none.")


class InviteForm(forms.Form):
    role = forms.ChoiceField(choices=Invitation.Role.choices, initial=Invitation.Role.MEMBER)


class SignupForm(UserCreationForm):
    """Create an account from an invitation: a username and a password (no e-mail needed)."""
