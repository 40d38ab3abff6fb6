"""Read a `POST /rentals` body into an order: the API's own input checks and messages, then the one order
service (`rentals.ordering.rental_order_build`) that the rent form uses too.

Every refusal is an `ApiError` naming the field at fault.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest

from accounts.models import Customer, UpstreamCredential, customer_ref_validator
from accounts.roles import is_operator
from accounts.validators import validate_ssh_public_key
from api.bodies import json_body
from api.errors import ApiError
from api.fabrics import listing_for
from api.schemas import RentalCreateIn
from rentals import offers, selectors
from rentals.offers import Template
from rentals.ordering import RentOrder, rental_order_build
from rentals.upstream import UpstreamError
from rentals.validators import validate_pod_name


def order_body_parse(raw: bytes) -> RentalCreateIn:
    """Return the request body as a `RentalCreateIn`; raise 400 for no JSON object, 422 for bad fields."""
    return json_body(raw, RentalCreateIn)


def field_error(field: str, code: str, message: str, status: int = 422) -> ApiError:
    """Return the envelope's refusal of one field."""
    return ApiError(
        status,
        code,
        f"{field}: {message}",
        hint="Fix this field and send the request again.",
        validation_errors=[{"field": field, "message": message}],
    )


def order_build(request: HttpRequest, data: RentalCreateIn) -> tuple[Customer, RentOrder, str | None]:
    """Return the customer, the order and the X-Customer-Ref to send; raise ApiError for what is wrong.

    The order is checked against the chosen customer's credential's offers: its fabric's free nodes and its
    cluster templates.
    """
    customer = _customer_checked(request, data)
    if (data.executor_ids is None) == (data.node_count is None):
        raise field_error("executor_ids", "nodes_required", "Give either executor_ids or node_count (not both).")
    try:
        keys = [validate_ssh_public_key(key) for key in data.ssh_public_keys]
    except DjangoValidationError as exc:
        raise field_error("ssh_public_keys", "invalid_ssh_key", exc.messages[0]) from exc
    try:
        validate_pod_name(data.pod_name)
    except DjangoValidationError as exc:
        raise field_error("pod_name", "invalid_pod_name", exc.messages[0]) from exc
    credential = selectors.customer_credential(customer)
    if credential is None:
        raise ApiError(
            422,
            "no_credential",
            f"Customer {customer.name} has no active Lium credential.",
            hint="Ask an operator to set one.",
        )
    listing = listing_for(credential)
    fabric = listing.fabric(data.fabric_id)
    if fabric is None:
        raise field_error("fabric_id", "fabric_not_offered", "This fabric is not offered now; list fabrics again.")
    try:
        order = rental_order_build(
            fabric=fabric,
            listing=listing,
            templates=_templates(credential),
            executor_ids=data.executor_ids,
            node_count=data.node_count,
            template_id=data.template_id,
            pod_name=data.pod_name,
            public_keys=keys,
            initial_port_count=data.initial_port_count,
            termination_hours=data.termination_hours,
            customer=customer,  # its removal policy fills in or caps termination_hours
            enable_jupyter=data.enable_jupyter,
            enable_volume_encryption=data.enable_volume_encryption,
            enable_backups=data.enable_backups,
        )
    except DjangoValidationError as exc:
        field, [error] = next(iter(exc.error_dict.items()))
        raise field_error(field, error.code or "invalid_nodes", error.messages[0]) from exc
    return customer, order, data.customer_ref or customer.customer_ref or None


def _customer_checked(request: HttpRequest, data: RentalCreateIn) -> Customer:
    """Return the customer the order is for, once `customer_ref` is allowed and well formed."""
    if data.customer_ref not in (None, "") and not is_operator(request.user):
        raise ApiError(
            403,
            "customer_ref_not_allowed",
            "Only operators may set customer_ref; leave it out to use your customer's ref.",
            hint="Remove customer_ref from the request.",
        )
    customer = _customer_resolve(request, data.customer)
    if data.customer_ref:
        try:
            customer_ref_validator(data.customer_ref)
        except DjangoValidationError as exc:
            raise field_error("customer_ref", "invalid_customer_ref", exc.messages[0]) from exc
    return customer


def _customer_resolve(request: HttpRequest, wanted: int | str | None) -> Customer:
    """Return the customer named by id or name (or the user's only one) that the user may rent for."""
    customers = selectors.customer_list_for_renting(user=request.user).select_related("default_credential")
    if wanted is None:
        mine = list(customers[:2])
        if len(mine) != 1:
            raise field_error(
                "customer", "customer_required", "Say which customer this rental is for (its id or name)."
            )
        return mine[0]
    found = selectors.customer_get_named(customers=customers, wanted=wanted)
    if found is None:
        raise field_error("customer", "unknown_customer", f"You may not rent for a customer '{wanted}'.")
    return found


def _templates(credential: UpstreamCredential) -> list[Template]:
    """Return the credential's cluster templates, newest first; raise 503 when they cannot be listed."""
    try:
        return offers.cluster_templates(credential=credential)
    except UpstreamError as exc:
        raise ApiError(
            503, "upstream_unavailable", f"The Lium API could not list templates ({exc}).", hint="Try again."
        ) from exc
