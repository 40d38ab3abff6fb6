"""Forms for staff pages: every action needs a reason and a ticked confirmation (works without JavaScript)."""

from __future__ import annotations

from datetime import date, timedelta

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone

from rentals.models import RentalEvent

NOT_RENTED = "not_rented"


class ActionForm(forms.Form):
    """A staff action: the reason goes on the rental's timeline; the checkbox is the no-JS confirmation."""

    reason = forms.CharField(
        max_length=500,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "Why (recorded on the timeline)", "autocomplete": "off"}),
        error_messages={"required": "Say why: the reason is recorded on the rental's timeline."},
    )
    confirm = forms.BooleanField(
        label="I confirm",
        error_messages={"required": "Tick the box to confirm."},
    )


class ConfirmReconciliationForm(ActionForm):
    """Settle an outcome-unknown rental: one of the clusters reconciliation found, or not rented."""

    outcome = forms.ChoiceField(label="Outcome", widget=forms.RadioSelect)

    def __init__(self, *args: object, cluster_ids: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        choices = [(cluster_id, f"Rented as cluster {cluster_id}") for cluster_id in cluster_ids]
        choices.append((NOT_RENTED, "Not rented (nothing exists upstream)"))
        self.fields["outcome"].choices = choices  # type: ignore[attr-defined]

    @property
    def cluster_id(self) -> str | None:
        outcome = self.cleaned_data["outcome"]
        return None if outcome == NOT_RENTED else outcome


class SearchForm(forms.Form):
    q = forms.CharField(max_length=200, required=False, strip=True, label="Search")


def report_date_field() -> forms.DateField:
    """A report date; bounded, so that a day added or a time zone applied can never overflow."""
    return forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[MinValueValidator(date(2000, 1, 1)), MaxValueValidator(date(2999, 12, 31))],
    )


class UsageForm(forms.Form):
    start = report_date_field()
    end = report_date_field()

    def period(self) -> tuple:
        """Return (start, end) dates, defaulting to the last 30 days, end included."""
        today = timezone.localdate()
        data = self.cleaned_data if self.is_valid() else {}
        end = data.get("end") or today
        start = data.get("start") or end - timedelta(days=29)
        if start > end:
            start, end = end, start
        return start, end


class AuditFilterForm(forms.Form):
    user = forms.CharField(required=False, max_length=150, label="User (username)")
    kind = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any"),
            (RentalEvent.Kind.STAFF_ACTION, "Staff actions"),
            (RentalEvent.Kind.SUPPORT_VIEW, "Support views"),
            ("support_read", "Support reads of lists, teams, webhooks, usage"),
        ],
    )
    since = report_date_field()
    until = report_date_field()
