"""The one order service: the rent form and the JSON API hand it what was asked for (`OrderChoice`), and it
resolves the customer, the X-Customer-Ref, the fabric and the template once for both, then saves the rental.

Every refusal is an `OrderRefused` naming the field at fault; the form shows it as a form error, the API as its
error envelope. Offers that cannot be read now raise `UpstreamError` (try again), not a refusal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.exceptions import ValidationError

from accounts.models import Customer, UpstreamCredential, customer_ref_validator
from accounts.roles import is_operator
from accounts.validators import validate_ssh_public_key
from rentals import lium_switch, offers, selectors
from rentals.estimates import cluster_estimate_read
from rentals.fabric_check.keys import check_key_generate
from rentals.fabric_check.parse import link_rate_parse
from rentals.models import Rental
from rentals.offers import Fabric, OfferListing, Template
from rentals.orders.order import RentOrder, rental_order_build
from rentals.orders.scheduled import start_at_check
from rentals.orders.validators import validate_pod_name
from rentals.services import rental_submit
from rentals.upstream import UpstreamError
from rentals.verification.records import UNSTATED_LINK_RATE_GBPS, CheckPlan


@dataclass(frozen=True)
class OrderChoice:
    """What was asked for, as the form or the API read it: nothing resolved or checked against offers yet."""

    fabric_id: str
    pod_name: str
    public_keys: list[str]
    customer: int | str | None = None  # an id or a name; None: the user's only customer
    customer_ref: str | None = None  # operators only: this rental's X-Customer-Ref instead of the customer's
    executor_ids: list[str] | None = None  # the nodes picked, or
    node_count: int | None = None  # the N cheapest whole free nodes
    template_id: str | None = None  # None: the newest cluster template
    options: dict[str, Any] = field(default_factory=dict)  # the rest of `RentOrder` (ports, hours, switches)
    verify_fabric: bool | None = None  # None: the customer's default (`Customer.verify_fabric_default`)
    start_at: datetime | None = None  # a scheduled start (`rentals.orders.scheduled`); None: send it now
    preset_id: int | None = None  # with start_at: the preset whose nodes are picked again at that time


@dataclass(frozen=True)
class OrderOffer:
    """Whom the order is for and what that customer's credential offers now: the order is checked against it."""

    customer: Customer
    credential: UpstreamCredential
    listing: OfferListing
    fabric: Fabric
    templates: list[Template]


class OrderRefused(Exception):
    """Why an order is refused: a message saying what to fix, a code, and the field at fault (None: the order)."""

    def __init__(
        self, message: str, *, code: str, field: str | None = None, details: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.details = details or {}  # what the API adds to its error body (a quota: its limit and the usage)


@dataclass(frozen=True)
class OrderChecked:
    """An order ready to save: whom it is for, the credential it is sent with, the order and its X-Customer-Ref."""

    customer: Customer
    credential: UpstreamCredential
    order: RentOrder
    customer_ref: str | None
    estimated_ready_seconds: int | None = None  # Lium's estimate for these nodes (None: unknown), kept on the rental
    check: CheckPlan | None = None  # a verified order's check key (its public line is in the order) and link rate
    start_at: datetime | None = None  # checked: in the future, at most SCHEDULE_MAX_DAYS ahead, in UTC
    preset_id: int | None = None


def order_check(*, user: User, choice: OrderChoice, offer: OrderOffer | None = None) -> OrderChecked:
    """Check the choice and build its order against the offer; raise OrderRefused saying what to fix.

    `offer` is what the rent form showed (resolved by `order_offer` for this request); None resolves it from
    the choice. It may call the upstream: call it outside a transaction.
    """
    override = _ref_override(user, choice.customer_ref)
    public_keys = _choice_check(choice)
    start_at = None
    if choice.start_at is not None:
        start_at = _field_check("start_at", "invalid_start_at", start_at_check, choice.start_at)
    offer = offer or order_offer(user=user, customer=choice.customer, fabric_id=choice.fabric_id)
    if lium_switch.cluster_renting_off_since(credential=offer.credential) is not None:
        message = f"{lium_switch.SWITCH_OFF_MESSAGE}: no cluster can be rented until Lium switches it back on."
        raise OrderRefused(message, code=lium_switch.SWITCH_OFF_CODE)
    verify = offer.customer.verify_fabric_default if choice.verify_fabric is None else choice.verify_fabric
    # The check's key joins the order's keys before the body is built: the stored, byte-identical body carries it.
    check = None
    if verify:
        link_rate = link_rate_parse(offer.fabric.link_rate) or UNSTATED_LINK_RATE_GBPS
        check = CheckPlan(key=check_key_generate(), link_rate_gbps=link_rate)
        public_keys = [*public_keys, check.key.public_line]
    try:
        order = rental_order_build(
            fabric=offer.fabric,
            listing=offer.listing,
            templates=offer.templates,
            executor_ids=choice.executor_ids,
            node_count=choice.node_count,
            template_id=choice.template_id,
            customer=offer.customer,  # its removal policy fills in or caps termination_hours
            pod_name=choice.pod_name,
            public_keys=public_keys,
            **choice.options,
        )
    except ValidationError as exc:
        name, [error] = next(iter(exc.error_dict.items()))
        raise OrderRefused(error.messages[0], code=error.code or "invalid_nodes", field=name) from exc
    # Usually cached by the summary or node listing the customer just saw; unknown when Lium does not say in time.
    estimate = cluster_estimate_read(
        credential=offer.credential, template_id=order.template_id, executor_ids=order.executor_ids
    )
    return OrderChecked(
        offer.customer,
        offer.credential,
        order,
        override or offer.customer.customer_ref or None,
        estimated_ready_seconds=estimate.seconds if estimate else None,
        check=check,
        start_at=start_at,
        preset_id=choice.preset_id if start_at is not None else None,
    )


def order_save(*, user: User, checked: OrderChecked, submit_token: uuid.UUID | None = None) -> Rental:
    """Save the checked order's rental (`services.rental_submit`); raise OrderRefused above a cap or budget.

    A repeated `submit_token` returns the rental it created.
    """
    try:
        return rental_submit(
            user=user,
            customer=checked.customer,
            order=checked.order,
            customer_ref=checked.customer_ref,
            credential=checked.credential,
            submit_token=submit_token,
            estimated_ready_seconds=checked.estimated_ready_seconds,
            check=checked.check,
            start_at=checked.start_at,
            preset_id=checked.preset_id,
        )
    except ValidationError as exc:
        details = getattr(exc, "details", None)  # billing's QuotaExceeded names the quota and the usage
        raise OrderRefused(" ".join(exc.messages), code=exc.code or "order_refused", details=details) from exc


def order_offer(*, user: AbstractBaseUser | AnonymousUser, customer: int | str | None, fabric_id: str) -> OrderOffer:
    """Return the customer `customer` names among those the user may rent for, and what its credential offers.

    Raise OrderRefused for a customer not theirs, one without a credential, or a fabric not offered now;
    UpstreamError when the offers or templates cannot be read now.
    """
    found = _customer_resolve(user, customer)
    credential = selectors.customer_credential(found)
    if credential is None:
        message = f"Customer {found.name} has no active Lium credential; ask an operator to set one."
        raise OrderRefused(message, code="no_credential")
    try:
        listing = offers.offers_get(credential=credential)
        fabric = listing.fabric(fabric_id)
        if fabric is None:
            message = "This fabric is not offered now; list fabrics again."
            raise OrderRefused(message, code="fabric_not_offered", field="fabric_id")
        return OrderOffer(found, credential, listing, fabric, offers.cluster_templates(credential=credential))
    except ValueError as exc:  # an answer that could not be read proves nothing: try again
        raise UpstreamError(f"The Lium API's answer could not be read ({exc}).") from exc


def _customer_resolve(user: AbstractBaseUser | AnonymousUser, wanted: int | str | None) -> Customer:
    """Return the customer named by id or name (or the user's only one) that the user may rent for."""
    customers = selectors.customer_list_for_renting(user=user).select_related("default_credential")
    if wanted is None:
        mine = list(customers[:2])
        if len(mine) != 1:
            message = "Say which customer this rental is for (its id or name)."
            raise OrderRefused(message, code="customer_required", field="customer")
        return mine[0]
    found = selectors.customer_get_named(customers=customers, wanted=wanted)
    if found is None:
        raise OrderRefused(f"You may not rent for a customer '{wanted}'.", code="unknown_customer", field="customer")
    return found


def _ref_override(user: User, override: str | None) -> str:
    """Return the X-Customer-Ref the user set for this rental ("": the customer's own); only operators may."""
    if not override:
        return ""
    if not is_operator(user):
        message = "Only operators may set customer_ref; leave it out to use your customer's ref."
        raise OrderRefused(message, code="customer_ref_not_allowed", field="customer_ref")
    _field_check("customer_ref", "invalid_customer_ref", customer_ref_validator, override)
    return override


def _choice_check(choice: OrderChoice) -> list[str]:
    """Refuse what is wrong with the choice itself, before any offer is read; return its keys, normalised."""
    if (choice.executor_ids is None) == (choice.node_count is None):
        message = "Give either executor_ids or node_count (not both)."
        raise OrderRefused(message, code="nodes_required", field="executor_ids")
    _field_check("pod_name", "invalid_pod_name", validate_pod_name, choice.pod_name)
    if not choice.public_keys:
        raise OrderRefused("Add at least one SSH public key.", code="no_ssh_key", field="ssh_public_keys")
    return [
        _field_check("ssh_public_keys", "invalid_ssh_key", validate_ssh_public_key, key) for key in choice.public_keys
    ]


def _field_check(name: str, code: str, validator: Callable[[Any], Any], value: Any) -> Any:
    """Return what one field's validator returns; its ValidationError becomes the refusal of that field."""
    try:
        return validator(value)
    except ValidationError as exc:
        raise OrderRefused(exc.messages[0], code=code, field=name) from exc
