"""Customer pages of presets: list and save (also from the rent form), delete, use one, and "Rent again"."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts.audit import support_read_record
from accounts.models import Customer, SshPublicKey
from accounts.users import request_user
from presets import again, selectors, services
from presets.forms import PresetForm
from presets.matching import listing_for_customer
from rentals.selectors import customer_list_for_renting, rental_get_for_user
from rentals.web.prefill import rent_prefill_url


class PresetPageForm(PresetForm):
    """The preset form with the customer it is for (one of those the user rents for)."""

    def __init__(self, *args: Any, customers: list[Customer], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.customers = {str(customer.pk): customer for customer in customers}
        self.fields["customer"] = forms.ChoiceField(choices=[(pk, c.name) for pk, c in self.customers.items()])
        self.order_fields(["customer", *self.field_order])

    def clean_customer(self) -> Customer:
        return self.customers[self.cleaned_data["customer"]]


def _renting_customers(request: HttpRequest) -> list[Customer]:
    customers = list(customer_list_for_renting(user=request.user).select_related("default_credential"))
    if not customers:
        raise PermissionDenied("Support can look but not change presets: that needs a customer membership.")
    return customers


@login_required
@require_http_methods(["GET", "POST"])
def preset_list(request: HttpRequest) -> HttpResponse:
    """The customer's presets (shared by its members), and a form to save one."""
    presets = list(selectors.preset_list_for_user(user=request.user))
    support_read_record(user=request.user, customer_ids={p.customer_id for p in presets}, what="presets")
    customers = list(customer_list_for_renting(user=request.user))
    form = None
    if customers:
        form = PresetPageForm(request.POST if request.method == "POST" else None, customers=customers)
    elif request.method == "POST":
        raise PermissionDenied("Support can look but not change presets: that needs a customer membership.")
    if request.method == "POST" and form is not None and form.is_valid():
        fields = form.model_fields()
        customer = fields.pop("customer")
        try:
            preset = services.preset_create(customer=customer, created_by=request_user(request), fields=fields)
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name, errors)
        else:
            messages.success(request, f"Preset '{preset.name}' saved for {customer.name}.")
            return redirect("presets:preset_list")
    return render(request, "presets/presets.html", {"presets": presets, "form": form})


@login_required
@require_POST
def preset_from_rent_form(request: HttpRequest) -> HttpResponse:
    """ "Save as preset…" on the rent form: the preset form, filled in from what the rent form held."""
    customers = _renting_customers(request)
    chosen = next((c for c in customers if str(c.pk) == request.POST.get("customer", "")), customers[0])
    listing, _ = listing_for_customer(chosen)
    fabric = listing.fabric(request.POST.get("fabric", "")) if listing else None
    saved = SshPublicKey.objects.filter(user_id=request.user.pk or 0)
    chosen_keys = set(request.POST.getlist("saved_keys"))
    keys = [key.public_key for key in saved if str(key.pk) in chosen_keys]
    keys += [line for line in request.POST.get("ssh_public_keys", "").splitlines() if line.strip()]
    initial = {
        "customer": str(chosen.pk),
        "gpu_type": fabric.gpu_type if fabric else "",
        "fabric_type": fabric.fabric_type if fabric else "",
        "node_count": max(2, len(request.POST.getlist("executor_ids"))),
        "ssh_public_keys": "\n".join(dict.fromkeys(keys)),
        **{name: request.POST.get(name, "") for name in ("pod_name", "template_id", "initial_port_count")},
        "termination_hours": request.POST.get("termination_hours", ""),
        "enable_jupyter": request.POST.get("enable_jupyter") == "on",
    }
    form = PresetPageForm(initial=initial, customers=customers)
    messages.info(request, "Name the preset and save it; you can add a price or link-rate limit first.")
    presets = list(selectors.preset_list_for_user(user=request.user))
    return render(request, "presets/presets.html", {"presets": presets, "form": form, "focus_name": True})


@login_required
@require_POST
def preset_delete(request: HttpRequest, preset_id: int) -> HttpResponse:
    preset = selectors.preset_get_for_user(user=request.user, pk=preset_id, change=True)
    services.preset_delete(preset=preset)
    messages.success(request, f"Preset '{preset.name}' deleted.")
    return redirect("presets:preset_list")


@login_required
def preset_use(request: HttpRequest, preset_id: int) -> HttpResponse:
    """Open the rent form on the cheapest nodes that fit the preset, or go back to the fabrics saying why not."""
    preset = selectors.preset_get_for_user(user=request.user, pk=preset_id, change=True)
    return _open_rent_form(request, preset.customer, again.preset_start(preset))


@login_required
def rental_rent_again(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """ "Rent again": the rent form with a past rental's settings, on its nodes if they are still free."""
    rental = rental_get_for_user(user=request.user, public_id=public_id)
    if not customer_list_for_renting(user=request.user).filter(pk=rental.customer_id).exists():
        raise PermissionDenied("Renting again needs a membership of the rental's customer (or the operator role).")
    return _open_rent_form(request, rental.customer, again.rental_start(rental))


def _open_rent_form(request: HttpRequest, customer: Customer, start: again.RentStart) -> HttpResponse:
    if start.fabric_id is None:
        messages.error(request, start.note)
        return redirect(f"{reverse('rentals:fabric_list')}?customer={customer.pk}")
    initial = {**start.initial, "note": start.note}
    assert customer.pk is not None
    return redirect(rent_prefill_url(request, customer_id=customer.pk, fabric_id=start.fabric_id, initial=initial))
