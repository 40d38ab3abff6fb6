"""The capacity watch page: a form to start one and the customer's watches with how each ended."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.audit import support_read_record
from accounts.models import Customer
from accounts.users import request_user
from presets import selectors, watching
from presets.forms import WatchForm
from presets.models import Preset
from rentals.selectors import customer_list_for_renting

WATCHES_SHOWN = 100


class WatchPageForm(WatchForm):
    """The watch form with its customer and the presets of the customers the user rents for."""

    def __init__(self, *args: Any, customers: list[Customer], presets: list[Preset], **kwargs: Any) -> None:
        super().__init__(
            *args,
            max_hours=settings.CAPACITY_WATCH_MAX_HOURS,
            default_hours=settings.CAPACITY_WATCH_DEFAULT_HOURS,
            **kwargs,
        )
        self.customers = {str(customer.pk): customer for customer in customers}
        self.presets = {str(preset.pk): preset for preset in presets}
        self.fields["customer"] = forms.ChoiceField(choices=[(pk, c.name) for pk, c in self.customers.items()])
        self.fields["preset"] = forms.ChoiceField(
            required=False,
            choices=[("", "— none: the fields below —"), *((pk, p.name) for pk, p in self.presets.items())],
            help_text="Watch for what a preset asks (its nodes and filters); needed to rent by itself.",
        )
        self.order_fields(["customer", "preset", "node_count", "gpu_type"])

    def clean_customer(self) -> Customer:
        return self.customers[self.cleaned_data["customer"]]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        preset = self.presets.get(data.get("preset") or "")
        customer = data.get("customer")
        if preset is not None and customer is not None and preset.customer_id != customer.pk:
            self.add_error("preset", "That preset is another customer's; pick one of this customer's.")
        data["preset"] = preset
        return data


@login_required
@require_http_methods(["GET", "POST"])
def watch_list(request: HttpRequest) -> HttpResponse:
    """Start a watch; list the watches of the user's customers."""
    customers = list(customer_list_for_renting(user=request.user))
    if request.method == "POST" and not customers:
        raise PermissionDenied("Support can look but not start watches: that needs a customer membership.")
    presets = list(Preset.objects.filter(customer__in=customers)) if customers else []
    form = None
    if customers:
        data = request.POST if request.method == "POST" else None
        initial = {"preset": request.GET.get("preset", "")}
        form = WatchPageForm(data, initial=initial, customers=customers, presets=presets)
    if request.method == "POST" and form is not None and form.is_valid():
        fields = form.model_fields()
        customer, preset = fields.pop("customer"), fields.pop("preset")
        try:
            watch = watching.watch_create(
                customer=customer, created_by=request_user(request), fields=fields, preset=preset
            )
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name, errors)
        else:
            messages.success(
                request, f"Watching for {watch.want.describe()} until {watch.expires_at:%Y-%m-%d %H:%M} UTC."
            )
            return redirect("presets:watch_list")
    watches = list(selectors.watch_list_for_user(user=request.user)[:WATCHES_SHOWN])
    support_read_record(user=request.user, customer_ids={w.customer_id for w in watches}, what="watches")
    return render(request, "presets/watches.html", {"form": form, "watches": watches})


@login_required
@require_POST
def watch_cancel(request: HttpRequest, watch_id: int) -> HttpResponse:
    watch = selectors.watch_get_for_user(user=request.user, pk=watch_id, change=True)
    if watching.watch_cancel(watch=watch):
        messages.success(request, "Watch cancelled.")
    else:
        messages.error(request, "This watch had already ended.")
    return redirect("presets:watch_list")
