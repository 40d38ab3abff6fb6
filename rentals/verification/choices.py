"""After a failed fabric check, the customer's two choices, one click each: keep the cluster unverified (ready), or
terminate it and rent again on the same fabric without the slow node(s), through the one order service.

Rent again takes the fabric's cheapest whole free nodes, as many as before, never a slow one (the failed cluster's
healthy nodes are still held by it when the new order is checked, so they are free only once Lium removed it). The
new order is checked before the old cluster is terminated: a refusal (too few free nodes, a budget) changes nothing.
Its submit token is derived from the failed rental, so a second click returns the rental the first one made.
"""

from __future__ import annotations

import json
import uuid

from django.contrib.auth.models import User
from django.db import transaction

from rentals import services
from rentals.audit import change_event
from rentals.models import FabricCheck, Rental
from rentals.orders.order import OPTIONS
from rentals.orders.service import OrderChoice, OrderRefused, order_check, order_offer, order_save
from rentals.ready_time import first_ready_fields
from rentals.states import RentalStatus
from rentals.transitions import rental_transition

RENT_AGAIN_NAMESPACE = uuid.UUID("6f1b1f0e-2f7a-4c55-9a57-27b1e0c7a3d1")


def fabric_check_keep(*, rental: Rental, actor: User | None) -> bool:
    """Keep a cluster whose check failed as it is: it becomes ready, marked unverified. Return whether it moved."""
    with transaction.atomic():
        moved = rental_transition(
            rental_id=rental.pk,
            from_status=RentalStatus.CHECK_FAILED,
            to_status=RentalStatus.READY,
            **change_event(
                actor=actor,
                action="keep_unverified",
                reason="",
                message="Kept as it is after the failed fabric check: ready, unverified.",
            ),
            **first_ready_fields(rental),  # ready from now: the check's wait and the choice count in its time
        )
        if moved:
            FabricCheck.objects.filter(rental=rental).update(kept_unverified=True)
    return moved


def fabric_check_rent_again(*, rental: Rental, user: User) -> Rental:
    """Terminate a cluster whose check failed and rent again without its slow node(s); return the new rental.

    Raise OrderRefused saying why nothing was done (the old cluster is then kept as it is).
    """
    check = FabricCheck.objects.select_related("rented_again").filter(rental=rental).first()
    if check is None:
        raise OrderRefused("This rental was not verified: there is no fabric check to act on.", code="not_verified")
    if check.rented_again is not None:
        return check.rented_again  # the second click
    if rental.status != RentalStatus.CHECK_FAILED:
        raise OrderRefused("Only a cluster whose fabric check failed can be rented again here.", code="not_failed")
    choice = _choice_without_slow(rental, check, user)
    checked = order_check(user=user, choice=choice)
    token = uuid.uuid5(RENT_AGAIN_NAMESPACE, str(rental.public_id))
    with transaction.atomic():
        services.rental_terminate(
            rental=rental, actor=user, reason="Rent again without the slow node(s) after the fabric check."
        )
        again = order_save(user=user, checked=checked, submit_token=token)
        FabricCheck.objects.filter(pk=check.pk, rented_again__isnull=True).update(rented_again=again)
    return again


def _choice_without_slow(rental: Rental, check: FabricCheck, user: User) -> OrderChoice:
    """Return the same order on the same fabric, on free nodes none of which is slow; its keys but the check's."""
    body = json.loads(bytes(rental.request_body))
    slow = {member.executor_id for member in rental.members.all() if member.rank in set(check.slow_ranks)}
    offer = order_offer(user=user, customer=rental.customer_id, fabric_id=rental.fabric_id)
    free = [node.id for node in offer.fabric.cheapest(len(offer.fabric.nodes)) if node.id not in slow]
    if len(free) < rental.node_count:
        raise OrderRefused(
            f"This fabric has only {len(free)} whole free node(s) other than the slow one(s) now, "
            f"{rental.node_count} are needed; try again once nodes are free.",
            code="not_enough_nodes",
        )
    keys = [key for key in body.get("user_public_key", []) if key != check.public_key_line]
    return OrderChoice(
        customer=rental.customer_id,
        fabric_id=rental.fabric_id,
        executor_ids=free[: rental.node_count],
        template_id=body.get("template_id"),
        pod_name=f"{rental.pod_name[:57]}-again",  # not the old name: reconciliation tells orders apart by it
        public_keys=keys,
        options={name: body[name] for name in OPTIONS if name in body},
        verify_fabric=True,
    )
