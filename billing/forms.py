"""Forms for the money pages."""

from __future__ import annotations

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

    def chosen(self) -> tuple[Month, int | None]:
        """Return the month and customer id asked for (this month, or all customers, for a bad input)."""
        if not self.is_bound:
            return Month.of(timezone.now()), None
        self.is_valid()  # fills cleaned_data with the fields that are valid
        return self.cleaned_data.get("month") or Month.of(timezone.now()), self.cleaned_data.get("customer")


class OperatorBudgetForm(forms.Form):
    monthly_budget_usd = _money("Monthly budget (USD)", "Empty: no budget.")
    enforce = forms.BooleanField(
        required=False, label="Enforce: terminate this customer's clusters after the grace period at 100 %"
    )
    grace_hours = forms.IntegerField(label="Grace period (hours)", min_value=0, max_value=24 * 31, initial=24)


class CustomerBudgetForm(forms.Form):
    customer_budget_usd = _money("Our own monthly budget (USD)", "At or below the operators' budget; empty: none.")


class InviteForm(forms.Form):
    role = forms.ChoiceField(choices=Invitation.Role.choices, initial=Invitation.Role.MEMBER)


class SignupForm(UserCreationForm):
    """Create an account from an invitation: a username and a password (no e-mail needed)."""
