"""Writes on rentals: submit, cancel, terminate. Each is one service with keyword-only arguments.

The attempt loop itself lives in `rentals.engine`; member tracking in `rentals.tracking.members`; a scheduled removal in
`rentals.removal.schedule`; settling an unknown rental (looking for its cluster, or staff confirming) in
`rentals.tracking.reconcile`.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import datetime
from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.models import Customer, UpstreamCredential
from common.logcontext import bind
from rentals.audit import change_event
from rentals.enqueue import cluster_delete_enqueue, rental_send_enqueue
from rentals.models import Rental, RentalEvent, RentalNode
from rentals.orders.order import RentOrder, request_body_build
from rentals.signals import order_checking
from rentals.states import HOLDS_CLUSTER_STATES, RentalStatus
from rentals.transitions import rental_transition
from rentals.verification.records import CheckPlan, fabric_check_create

logger = logging.getLogger(__name__)


def rental_submit(
    *,
    user: User | None,
    customer: Customer,
    order: RentOrder,
    customer_ref: str | None,
    credential: UpstreamCredential | None = None,
    submit_token: uuid.UUID | None = None,
    estimated_ready_seconds: int | None = None,
    check: CheckPlan | None = None,
    start_at: datetime | None = None,
    preset_id: int | None = None,
) -> Rental:
    """Create the rental row (key, bytes, hash) and enqueue its first attempt once the row is committed; with
    `start_at` (checked: `rentals.orders.scheduled.start_at_check`) it waits `scheduled` until then instead.

    `order` and `customer_ref` (the X-Customer-Ref to send; "" or None sends none) are checked already by the
    order service. A repeated `submit_token` returns the rental it already created instead of a second one.
    """
    credential = _credential_active(customer, credential or customer.default_credential)
    # A repeated `submit_token` (the form's second click) is found by the caller before it validates the form,
    # or, in a race, by the unique constraint below.
    try:
        with transaction.atomic():
            # Lock the customer so two orders at once cannot both slip under its budget or quotas (billing's).
            customer = Customer.objects.select_for_update().get(pk=customer.pk)
            gpus = order.gpus_per_node * len(order.executor_ids)
            order_checks_run(customer=customer, adding_per_hour=order.price_per_hour, adding_gpus=gpus)
            rental = _rental_create(
                user=user,
                customer=customer,
                credential=credential,
                order=order,
                customer_ref=customer_ref or None,
                submit_token=submit_token,
                estimated_ready_seconds=estimated_ready_seconds,
                start_at=start_at,
                preset_id=preset_id,
            )
            if check is not None:
                fabric_check_create(rental=rental, plan=check)
            if start_at is None:
                transaction.on_commit(lambda: rental_send_enqueue(rental.pk))
    except IntegrityError as exc:
        # Two requests with one form token raced; the other one created the rental (this user's only).
        if submit_token is None:
            raise
        existing = Rental.objects.filter(submit_token=submit_token, created_by=user).first()
        if existing is None:
            message = "This order form was already used; reload the page to order again."
            raise ValidationError(message, code="form_used") from exc
        return existing
    with bind(rental_id=rental.public_id, idempotency_key=rental.idempotency_key, customer=customer_ref or "-"):
        logger.info(
            "Rental saved: %s nodes on %s, body sha256 %s.",
            len(order.executor_ids),
            order.fabric_id,
            rental.body_sha256,
        )
    return rental


def _credential_active(customer: Customer, credential: UpstreamCredential | None) -> UpstreamCredential:
    if credential is None or not credential.active:
        raise ValidationError(
            f"Customer {customer.name} has no active Lium credential; ask an operator to set one.",
            code="no_credential",
        )
    return credential


def order_checks_run(*, customer: Customer, adding_per_hour: Decimal, adding_gpus: int) -> None:
    """Ask billing whether an order fits the customer's budget and quotas (ValidationError if not); lock the
    customer row first (`select_for_update`), so two orders at once cannot both slip under them."""
    order_checking.send(sender=Customer, customer=customer, adding_per_hour=adding_per_hour, adding_gpus=adding_gpus)


def _rental_create(
    *,
    user: User | None,
    customer: Customer,
    credential: UpstreamCredential,
    order: RentOrder,
    customer_ref: str | None,
    submit_token: uuid.UUID | None,
    estimated_ready_seconds: int | None = None,
    start_at: datetime | None = None,
    preset_id: int | None = None,
) -> Rental:
    """Save the rental with its nodes, a fresh idempotency key and the body it will send, and its first event."""
    body = request_body_build(order)
    status = RentalStatus.QUEUED if start_at is None else RentalStatus.SCHEDULED
    rental = Rental.objects.create(
        status=status,
        start_at=start_at,
        preset_id=preset_id,
        created_by=user if user is not None and user.is_authenticated else None,
        customer=customer,
        credential=credential,
        fabric_id=order.fabric_id,
        executor_ids=list(order.executor_ids),
        pod_name=order.pod_name,
        customer_ref=customer_ref,
        gpu_type=order.gpu_type,
        gpus_per_node=order.gpus_per_node,
        price_per_hour=order.price_per_hour,
        submit_token=submit_token,
        estimated_ready_seconds=estimated_ready_seconds,
        idempotency_key=uuid.uuid4(),
        request_body=body,
        body_sha256=hashlib.sha256(body).hexdigest(),
    )
    RentalNode.objects.bulk_create(
        [RentalNode(rental=rental, executor_id=executor_id) for executor_id in order.executor_ids]
    )
    RentalEvent.objects.create(
        rental=rental,
        kind=RentalEvent.Kind.CREATED,
        actor=rental.created_by,
        to_status=status,
        message=f"Order saved: {len(order.executor_ids)} nodes on {order.fabric_id}"
        + (f", to be sent at {start_at:%Y-%m-%d %H:%M} UTC." if start_at is not None else "."),
        data={"idempotency_key": str(rental.idempotency_key), "body_sha256": rental.body_sha256},
    )
    return rental


def rental_cancel(*, rental: Rental, actor: User | None, reason: str = "") -> bool:
    """Cancel a rental that has not been sent yet (queued, or scheduled for later); return whether it was."""
    if rental.status not in (RentalStatus.QUEUED, RentalStatus.SCHEDULED):
        return False
    return rental_transition(
        rental_id=rental.pk,
        from_status=rental.status,
        to_status=RentalStatus.CANCELLED,
        **change_event(
            actor=actor, action="cancel", reason=reason, message=f"Cancelled before it was sent. {reason}".strip()
        ),
    )


def rental_terminate(*, rental: Rental, actor: User | None, reason: str = "") -> bool:
    """Start removing the rental's cluster; the delete call runs in the worker."""
    if rental.status not in HOLDS_CLUSTER_STATES:
        return False
    if not rental.cluster_id:
        # Removal goes by cluster id; until the pod list has shown it, a delete could not name the cluster.
        raise ValidationError(
            "The cluster's id is not known yet, so it cannot be removed: wait until its nodes appear, or ask "
            "support to reconcile the rental (find its cluster at Lium)."
        )
    moved = rental_transition(
        rental_id=rental.pk,
        from_status=rental.status,
        to_status=RentalStatus.TERMINATING,
        **change_event(
            actor=actor, action="terminate", reason=reason, message=f"Terminate requested. {reason}".strip()
        ),
    )
    if moved:
        transaction.on_commit(lambda: cluster_delete_enqueue(rental.pk))
    return moved
