"""A scheduled start: an order saved for a later time (at most SCHEDULE_MAX_DAYS ahead) waits `scheduled`, and beat
sends it at its time through the normal engine (`scheduled → queued`, then the usual claim and send).

It was checked against the budget and quotas when made; at its time it is checked again, with the customer row
locked as at submit, and its exact nodes must still be free: otherwise it ends `refused` with the reason on its
page and timeline. The move out of `scheduled` is one conditional UPDATE (`rental_transition`), so however many
beats or workers look at a due rental, exactly one sends it. Its key and body were made at submit, as for any order.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import Customer
from rentals import offers
from rentals.audit import change_event
from rentals.enqueue import rental_send_enqueue
from rentals.models import Rental, RentalEvent, RentalNode
from rentals.orders.order import request_body_with_nodes
from rentals.services import order_checks_run
from rentals.signals import scheduled_nodes_picking
from rentals.states import RentalStatus
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream import UpstreamError

logger = logging.getLogger(__name__)

NODES_GONE = "scheduled_nodes_gone"
NO_MATCHING_NODES = "scheduled_no_matching_nodes"


@dataclass(frozen=True)
class Picked:
    """A scheduled preset's nodes, picked at its time."""

    fabric_id: str
    executor_ids: list[str]
    gpu_type: str
    gpus_per_node: int
    price_per_hour: Decimal


DUE_PER_SCAN = 100


def start_at_check(value: datetime, *, now: datetime | None = None) -> datetime:
    """Return a start time in UTC, or raise ValidationError saying what to fix (a timezone, the future, the bound)."""
    if timezone.is_naive(value):
        raise ValidationError("Give the start time with its timezone (e.g. 2030-06-01T09:00:00Z).", code="naive")
    now = now or timezone.now()
    days = settings.SCHEDULE_MAX_DAYS
    too_far = f"A rental can be scheduled at most {days} days ahead."
    try:
        value = value.astimezone(UTC)
    except OverflowError as exc:  # before year 1 or past year 9999 in UTC: its year says which
        if value.year > 1:
            raise ValidationError(too_far, code="start_too_far") from exc
        raise ValidationError("Give a start time in the future.", code="start_in_past") from exc
    if value <= now:
        raise ValidationError("Give a start time in the future.", code="start_in_past")
    if value > now + timedelta(days=days):
        raise ValidationError(too_far, code="start_too_far")
    return value


def rental_reschedule(*, rental: Rental, start_at: datetime, actor: User | None) -> bool:
    """Move a scheduled rental's start; return False when it is no longer scheduled (sent, refused, cancelled)."""
    start_at = start_at_check(start_at)
    with transaction.atomic():
        moved = rental_touch(rental_id=rental.pk, in_status=RentalStatus.SCHEDULED, start_at=start_at)
        if moved:
            message = f"Start moved to {start_at:%Y-%m-%d %H:%M} UTC."
            data = {"start_at": start_at.isoformat()}
            event = change_event(actor=actor, action="reschedule", reason="", message=message, data=data)
            RentalEvent.objects.create(rental_id=rental.pk, **event)
    return moved


def scheduled_send_due(*, now: datetime | None = None) -> dict[str, int]:
    """Send (or refuse) every scheduled rental whose time has come; return how many of each (beat's task)."""
    now = now or timezone.now()
    due = Rental.objects.filter(status=RentalStatus.SCHEDULED, start_at__lte=now).order_by("start_at")
    counts = {"sent": 0, "refused": 0, "waiting": 0}
    for rental in due.select_related("credential", "customer")[:DUE_PER_SCAN]:
        counts[scheduled_send(rental=rental)] += 1
    return counts


def scheduled_send(*, rental: Rental) -> str:
    """Send one due scheduled rental, or refuse it; return `sent`, `refused` or `waiting` (try on the next scan)."""
    try:
        listing = offers.offers_get(credential=rental.credential, refresh=True)  # outside any transaction
    except (UpstreamError, ValueError) as exc:
        logger.warning("Scheduled rental %s waits: the offers could not be read (%s).", rental.public_id, exc)
        return "waiting"
    picked = _preset_pick(rental, listing) if rental.preset_id is not None else None
    if isinstance(picked, str):
        return _refuse(rental, NO_MATCHING_NODES, picked, "Order again, or change the preset.")
    gone = _nodes_gone(rental, listing) if picked is None else ""
    if gone:
        return _refuse(rental, NODES_GONE, gone, "Order again with nodes that are free now.")
    refusal: tuple[str, str, str] | None = None
    with transaction.atomic():
        # Locked as at submit, so this order and another one at once cannot both slip under a budget or quota.
        customer = Customer.objects.select_for_update().get(pk=rental.customer_id)
        if picked is not None and not _nodes_apply(rental, picked):
            return "waiting"  # cancelled or sent by someone else meanwhile
        try:
            order_checks_run(
                customer=customer,
                adding_per_hour=rental.price_per_hour,
                adding_gpus=rental.gpus_per_node * rental.node_count,
            )
        except ValidationError as exc:
            transaction.set_rollback(True)
            refusal = (
                exc.code or "order_refused",
                " ".join(exc.messages),
                "Order again within your budget and quotas.",
            )
        else:
            moved = rental_transition(
                rental_id=rental.pk,
                from_status=RentalStatus.SCHEDULED,
                to_status=RentalStatus.QUEUED,
                message="Its start time came: the order is sent now.",
            )
            if not moved:
                return "waiting"  # cancelled or sent by someone else meanwhile
            transaction.on_commit(lambda: rental_send_enqueue(rental.pk))
    if refusal is not None:
        return _refuse(rental, *refusal)
    return "sent"


def _nodes_gone(rental: Rental, listing: offers.OfferListing) -> str:
    """Return why the rental's exact nodes cannot be rented now ("" when all are free on its fabric)."""
    fabric = listing.fabric(rental.fabric_id)
    if fabric is None:
        return f"Its fabric {rental.fabric_id} is not offered any more: its nodes are gone."
    try:
        offers.node_selection_check(chosen=list(rental.executor_ids), fabric=fabric, listing=listing)
    except ValidationError as exc:
        return f"Its nodes are gone: {exc.messages[0]}"
    return ""


def _preset_pick(rental: Rental, listing: offers.OfferListing) -> Picked | str:
    """Ask the presets app for the cheapest nodes that fit the rental's preset now; return them, or why none."""
    answers = [
        answer
        for _receiver, answer in scheduled_nodes_picking.send(sender=Rental, rental=rental, listing=listing)
        if answer is not None
    ]
    if not answers:
        return "Its preset could not be read."
    if isinstance(answers[0], str):
        return answers[0]
    fabric_id, executor_ids = answers[0]
    fabric = listing.fabric(fabric_id)
    nodes = {node.id: node for node in fabric.nodes} if fabric is not None else {}
    if not executor_ids or any(node_id not in nodes for node_id in executor_ids):
        return "No nodes that fit its preset are free now."
    first = nodes[executor_ids[0]]
    price = sum((nodes[node_id].price_per_hour for node_id in executor_ids), Decimal(0))
    return Picked(fabric_id, list(executor_ids), first.machine_name, first.gpu_count, price)


def _nodes_apply(rental: Rental, picked: Picked) -> bool:
    """Put the picked nodes on the scheduled rental (its nodes, body and price; same key); False if not scheduled."""
    body = request_body_with_nodes(bytes(rental.request_body), picked.executor_ids)
    fields = {
        "fabric_id": picked.fabric_id,
        "executor_ids": picked.executor_ids,
        "gpu_type": picked.gpu_type,
        "gpus_per_node": picked.gpus_per_node,
        "price_per_hour": picked.price_per_hour,
        "request_body": body,
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }
    if not rental_touch(rental_id=rental.pk, in_status=RentalStatus.SCHEDULED, **fields):
        return False
    for name, value in fields.items():
        setattr(rental, name, value)
    RentalNode.objects.filter(rental=rental).delete()
    RentalNode.objects.bulk_create([RentalNode(rental=rental, executor_id=node_id) for node_id in picked.executor_ids])
    RentalEvent.objects.create(
        rental=rental,
        kind=RentalEvent.Kind.STATE,
        message=f"Its preset's {len(picked.executor_ids)} cheapest matching nodes on {picked.fabric_id} were picked at "
        f"its time (${picked.price_per_hour:.2f}/hour).",
        data={"executor_ids": picked.executor_ids, "body_sha256": fields["body_sha256"]},
    )
    return True


def _refuse(rental: Rental, code: str, reason: str, hint: str) -> str:
    message = f"Not sent at its time: {reason} Nothing was rented."
    moved = rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.SCHEDULED,
        to_status=RentalStatus.REFUSED,
        message=message,
        data={"reason": code},
        error_code=code,
        error_message=message,
        error_hint=hint,
    )
    return "refused" if moved else "waiting"
