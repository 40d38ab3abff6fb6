"""Presets and capacity watches in the JSON API (django-ninja Routers, added to api.v1 at /presets, /watches).

Both belong to a customer: the key's user's only one, or the one named in the body. Reads need `read`, changes
`rent`; support reads and changes nothing. Fields are checked by the same forms as the pages (`presets.forms`),
and a refusal is the usual 422 envelope with `validation_errors`.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr

from accounts.audit import support_read_record
from accounts.models import Customer
from api.auth import require_scope, require_writer
from api.bodies import json_body
from api.errors import ApiError
from api.representations import json_response
from api.schemas import CustomerId, CustomerName, CustomerOut, ErrorOut
from presets import selectors, services, watching
from presets.forms import PresetForm, WatchForm
from presets.models import CapacityWatch, Preset
from rentals.selectors import customer_get_named, customer_list_for_renting

router = Router(tags=["presets"])
watch_router = Router(tags=["watches"])
ERRORS: dict[Any, Any] = {frozenset({400, 401, 403, 404, 409, 422}): ErrorOut}


class NodeWantIn(Schema):
    model_config = ConfigDict(extra="forbid")

    customer: CustomerId | CustomerName | None = Field(None, description="Optional when you belong to one customer.")
    gpu_type: StrictStr = Field("", max_length=100, description="Part of the GPU's name, e.g. H100; empty: any.")
    fabric_type: StrictStr = Field("", max_length=16, description="infiniband, roce or empty (any).")
    min_link_rate_gbps: StrictInt | None = Field(None, description="The fabric's link rate, at least (Gb/s).")
    max_price_per_node_hour: Decimal | None = Field(None, description="USD per node (all its GPUs) and hour, at most.")


class PresetIn(NodeWantIn):
    name: StrictStr = Field(..., max_length=100, description="Unique within the customer.")
    node_count: StrictInt = Field(..., description="2 to 64 whole nodes on one fabric.")
    pod_name: StrictStr = Field(..., max_length=63)
    ssh_public_keys: list[StrictStr] = Field(..., min_length=1, max_length=50)
    template_id: StrictStr | None = Field(None, max_length=100, description="None: the newest cluster template.")
    initial_port_count: StrictInt | None = None
    termination_hours: StrictInt | None = None
    enable_jupyter: StrictBool = False


class PresetOut(Schema):
    id: int
    name: str
    customer: CustomerOut
    gpu_type: str
    node_count: int
    fabric_type: str
    min_link_rate_gbps: int | None
    max_price_per_node_hour: str | None
    pod_name: str
    ssh_public_keys: list[str]
    template_id: str | None
    initial_port_count: int | None
    termination_hours: int | None
    enable_jupyter: bool
    created_at: datetime


class PresetListOut(Schema):
    items: list[PresetOut]


class WatchIn(NodeWantIn):
    node_count: StrictInt | None = Field(None, description="2 to 64; leave out with a preset.")
    preset: StrictInt | None = Field(None, description="A preset's id: watch for what it asks; needed for auto_rent.")
    hours: StrictInt | None = Field(None, description="How long to watch (default and maximum in the settings).")
    auto_rent: StrictBool = Field(False, description="Rent the nodes through the order service once, from the preset.")


class WatchOut(Schema):
    id: int
    customer: CustomerOut
    preset: int | None
    gpu_type: str
    node_count: int
    fabric_type: str
    min_link_rate_gbps: int | None
    max_price_per_node_hour: str | None
    auto_rent: bool
    status: str = Field(description="active, fired, expired, cancelled, or failed (found, but the order was refused).")
    created_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    fabric_id: str
    executor_ids: list[str]
    outcome: str
    rental_id: str | None = Field(None, description="The rental it placed (auto_rent).")
    demand_signal: str


class WatchListOut(Schema):
    items: list[WatchOut]


def _price(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:.4f}"


def preset_dict(preset: Preset) -> dict[str, Any]:
    return {
        "id": preset.pk,
        "name": preset.name,
        "customer": {"id": preset.customer_id, "name": preset.customer.name},
        "gpu_type": preset.gpu_type,
        "node_count": preset.node_count,
        "fabric_type": preset.fabric_type,
        "min_link_rate_gbps": preset.min_link_rate_gbps,
        "max_price_per_node_hour": _price(preset.max_price_per_node_hour),
        "pod_name": preset.pod_name,
        "ssh_public_keys": preset.public_keys,
        "template_id": preset.template_id or None,
        "initial_port_count": preset.initial_port_count,
        "termination_hours": preset.termination_hours,
        "enable_jupyter": preset.enable_jupyter,
        "created_at": preset.created_at,
    }


def watch_dict(watch: CapacityWatch) -> dict[str, Any]:
    return {
        "id": watch.pk,
        "customer": {"id": watch.customer_id, "name": watch.customer.name},
        "preset": watch.preset_id,
        "gpu_type": watch.gpu_type,
        "node_count": watch.node_count,
        "fabric_type": watch.fabric_type,
        "min_link_rate_gbps": watch.min_link_rate_gbps,
        "max_price_per_node_hour": _price(watch.max_price_per_node_hour),
        "auto_rent": watch.auto_rent,
        "status": watch.status,
        "created_at": watch.created_at,
        "expires_at": watch.expires_at,
        "ended_at": watch.ended_at,
        "fabric_id": watch.fabric_id,
        "executor_ids": watch.executor_ids,
        "outcome": watch.outcome,
        "rental_id": str(watch.rental.public_id) if watch.rental_id and watch.rental else None,
        "demand_signal": watch.demand_signal,
    }


def _refused(errors: dict[str, list[str]]) -> ApiError:
    items = [{"field": name, "message": message} for name, messages in errors.items() for message in messages]
    summary = "; ".join(f"{item['field']}: {item['message']}" for item in items[:5])
    hint = "Fix the fields listed in validation_errors and send the request again."
    return ApiError(422, "validation_error", summary, hint=hint, validation_errors=items)


def _form_data(form: Form) -> dict[str, Any]:
    """Return a bound form's cleaned data; raise the 422 envelope naming every field at fault."""
    if not form.is_valid():
        errors = {name if name != "__all__" else "body": [str(e) for e in errs] for name, errs in form.errors.items()}
        raise _refused(errors)
    return dict(form.cleaned_data)


def customer_for(request: HttpRequest, wanted: int | str | None) -> Customer:
    """The customer named (or the user's only one) among those the user rents for."""
    customers = customer_list_for_renting(user=request.user)
    if wanted is None:
        mine = list(customers[:2])
        if len(mine) != 1:
            raise _refused({"customer": ["Say which customer this is for (its id or name)."]})
        return mine[0]
    found = customer_get_named(customers=customers, wanted=wanted)
    if found is None:
        raise _refused({"customer": [f"You may not act for a customer '{wanted}'."]})
    return found


def _form_input(payload: Schema, **extra: Any) -> dict[str, Any]:
    return {**payload.model_dump(exclude_none=True), **extra}


@router.post("", response={201: PresetOut, **ERRORS}, summary="Save a preset")
def preset_create(request: HttpRequest) -> HttpResponse:
    """Save a named rent form for your customer (shared with its members); its nodes are picked when used."""
    require_writer(request, "rent")
    payload = json_body(request.body, PresetIn)
    customer = customer_for(request, payload.customer)
    form_input = _form_input(payload, ssh_public_keys="\n".join(payload.ssh_public_keys))
    if not payload.enable_jupyter:
        form_input.pop("enable_jupyter", None)  # an unchecked box is an absent field, as in a form post
    fields = _form_data(PresetForm(form_input))
    try:
        preset = services.preset_create(customer=customer, created_by=request.user, fields=fields)  # type: ignore[arg-type]
    except DjangoValidationError as exc:
        raise _refused(exc.message_dict) from exc
    return json_response(preset_dict(preset), status=201)


@router.get("", response={200: PresetListOut, **ERRORS}, summary="List presets")
def preset_list(request: HttpRequest) -> HttpResponse:
    """The presets of your customers."""
    require_scope(request, "read")
    presets = list(selectors.preset_list_for_user(user=request.user)[:500])
    support_read_record(user=request.user, customer_ids={p.customer_id for p in presets}, what="presets (API)")
    return json_response({"items": [preset_dict(preset) for preset in presets]})


@router.delete("/{preset_id}", response={204: None, **ERRORS}, summary="Delete a preset")
def preset_delete(request: HttpRequest, preset_id: int) -> HttpResponse:
    require_writer(request, "rent")
    preset = selectors.preset_get_for_user(user=request.user, pk=preset_id, change=True)
    services.preset_delete(preset=preset)
    return HttpResponse(status=204)


@watch_router.post("", response={201: WatchOut, **ERRORS}, summary="Start a capacity watch")
def watch_create(request: HttpRequest) -> HttpResponse:
    """Watch for N free nodes on one fabric (or what a preset asks); `capacity.available` fires once on a match."""
    require_writer(request, "rent")
    payload = json_body(request.body, WatchIn)
    customer = customer_for(request, payload.customer)
    preset = None
    if payload.preset is not None:
        preset = Preset.objects.filter(pk=payload.preset, customer=customer).first()
        if preset is None:
            raise _refused({"preset": [f"No preset {payload.preset} of {customer.name}."]})
    form_input = _form_input(payload)
    form_input.pop("preset", None)
    if not payload.auto_rent:
        form_input.pop("auto_rent", None)
    form = WatchForm(
        form_input, max_hours=settings.CAPACITY_WATCH_MAX_HOURS, default_hours=settings.CAPACITY_WATCH_DEFAULT_HOURS
    )
    fields = _form_data(form)
    try:
        watch = watching.watch_create(
            customer=customer,
            created_by=request.user,  # type: ignore[arg-type]
            fields=fields,
            preset=preset,
        )
    except DjangoValidationError as exc:
        raise _refused(exc.message_dict) from exc
    return json_response(watch_dict(watch), status=201)


@watch_router.get("", response={200: WatchListOut, **ERRORS}, summary="List capacity watches")
def watch_list(request: HttpRequest) -> HttpResponse:
    """Your customers' watches, newest first (the latest 500)."""
    require_scope(request, "read")
    watches = list(selectors.watch_list_for_user(user=request.user)[:500])
    support_read_record(user=request.user, customer_ids={w.customer_id for w in watches}, what="watches (API)")
    return json_response({"items": [watch_dict(watch) for watch in watches]})


@watch_router.delete("/{watch_id}", response={204: None, **ERRORS}, summary="Cancel a capacity watch")
def watch_cancel(request: HttpRequest, watch_id: int) -> HttpResponse:
    """End an active watch (an ended one stays as it ended)."""
    require_writer(request, "rent")
    watch = selectors.watch_get_for_user(user=request.user, pk=watch_id, change=True)
    watching.watch_cancel(watch=watch)
    return HttpResponse(status=204)
