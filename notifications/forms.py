"""Forms of the notification profile pages: register a webhook endpoint, choose e-mail events."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from accounts.models import Customer
from notifications import events as ev
from notifications.addresses import UnsafeUrl, url_check
from notifications.models import WebhookEndpoint

EVENT_CHOICES = list(ev.EVENT_TYPES.items())


class WebhookEndpointForm(forms.Form):
    url = forms.CharField(
        label="URL",
        max_length=2000,
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/hooks/lium"}),
        help_text="We POST signed JSON here (Standard Webhooks). No redirects are followed.",
    )
    kind = forms.ChoiceField(
        label="Kind",
        required=False,
        choices=[("", "From the URL (hooks.slack.com: Slack)"), *WebhookEndpoint.Kind.choices],
        help_text="Slack: the events arrive as Slack messages with a link to the rental.",
    )
    all_events = forms.BooleanField(label="Every event, including types added later", required=False, initial=True)
    events = forms.MultipleChoiceField(
        label="Or only these events",
        choices=EVENT_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    customer = forms.ModelChoiceField(queryset=Customer.objects.none(), empty_label=None)

    def __init__(self, *args: Any, customers: QuerySet[Customer], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["customer"].queryset = customers  # type: ignore[attr-defined]
        mine = list(customers[:2])
        # A member of one customer does not choose: the endpoint is for that customer.
        self.only_customer = mine[0] if len(mine) == 1 else None
        if self.only_customer is not None:
            self.fields["customer"].widget = forms.HiddenInput()
            self.fields["customer"].required = False

    def clean_url(self) -> str:
        url = self.cleaned_data["url"].strip()
        try:
            url_check(url)
        except UnsafeUrl as exc:
            raise ValidationError(str(exc)) from exc
        return url

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("customer") and self.only_customer is not None and "customer" not in self.errors:
            data["customer"] = self.only_customer
        if data.get("all_events"):
            data["subscription"] = [ev.ALL]
        elif data.get("events"):
            data["subscription"] = list(data["events"])
        else:
            raise ValidationError("Choose every event, or at least one event type.")
        return data


class EmailPreferenceForm(forms.Form):
    events = forms.MultipleChoiceField(
        label="E-mail me when",
        choices=EVENT_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
