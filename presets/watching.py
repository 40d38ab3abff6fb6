"""Capacity watches: made (with Lium's demand signal), checked by one beat task from the shared offers cache,
fired once.

Firing is a conditional UPDATE from `active`: however many scans run at once, one wins and the others do nothing.
The winner emits `capacity.available` in that same transaction (the outbox), or, for an `auto_rent` watch, places
the rental through the order service first (budgets, quotas, all-or-nothing) with a submit token made from the
watch, so even a repeated attempt returns the same rental.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import Customer
from notifications import events as ev
from notifications.services import event_emit
from presets.matching import nodes_pick
from presets.models import CapacityWatch, Preset
from presets.wants import NodePick
from rentals import enqueue, offers, selectors
from rentals.models import Rental
from rentals.orders.service import OrderChoice, OrderRefused, order_check, order_save
from rentals.upstream import UpstreamError
from rentals.web.prefill import rent_nodes_url

logger = logging.getLogger(__name__)
MAX_ACTIVE_WATCHES_PER_CUSTOMER = 50
WANT_FIELDS = ("gpu_type", "node_count", "fabric_type", "min_link_rate_gbps", "max_price_per_node_hour")
Status = CapacityWatch.Status
DEMAND_SIGNAL_TASK = "presets.tasks.watch_demand_signal"
# An auto-rent still without its rental this long after its claim lost its scan (a worker died): the next scan
# finishes it. Placing an order takes seconds; the watch's submit token keeps a late overlap to one rental.
AUTO_RENT_RESUME_AFTER = timedelta(minutes=2)
RENTING = " Renting them."


def watch_create(
    *, customer: Customer, created_by: User | None, fields: dict[str, Any], preset: Preset | None = None
) -> CapacityWatch:
    """Save a watch from a valid `WatchForm`'s fields (a preset fills in what it looks for); raise ValidationError.

    Lium's demand signal is sent by a task once the watch is committed; its failure is only logged.
    """
    fields = dict(fields)
    hours = fields.pop("hours", None) or settings.CAPACITY_WATCH_DEFAULT_HOURS
    if preset is not None:
        fields.update({name: getattr(preset, name) for name in WANT_FIELDS})
    elif fields.get("auto_rent"):
        message = "A watch rents by itself only from a preset (its pod name, keys and options); choose one."
        raise ValidationError({"auto_rent": ValidationError(message, code="preset_required")})
    if not fields.get("node_count"):
        raise ValidationError({"node_count": ValidationError("Say how many nodes to watch for.", code="required")})
    with transaction.atomic():
        Customer.objects.select_for_update().filter(pk=customer.pk).first()  # count one creation after the other
        if (
            CapacityWatch.objects.filter(customer=customer, status=Status.ACTIVE).count()
            >= MAX_ACTIVE_WATCHES_PER_CUSTOMER
        ):
            message = f"A customer may have at most {MAX_ACTIVE_WATCHES_PER_CUSTOMER} active watches; cancel one first."
            raise ValidationError({"node_count": ValidationError(message, code="too_many_watches")})
        watch = CapacityWatch.objects.create(
            customer=customer,
            created_by=created_by,
            preset=preset,
            expires_at=timezone.now() + timedelta(hours=hours),
            **{name: fields.get(name) for name in WANT_FIELDS if fields.get(name) is not None},
            auto_rent=bool(fields.get("auto_rent")),
        )
        if watch.gpu_type:
            transaction.on_commit(lambda: _demand_signal_enqueue(watch.pk))
    return watch


def _demand_signal_enqueue(watch_id: int) -> None:
    # By task name through the rentals' one enqueuer (a failed enqueue is only logged: the signal is a courtesy).
    enqueue._enqueue(DEMAND_SIGNAL_TASK, watch_id)


def watch_demand_signal(watch_id: int) -> None:
    """Send Lium's `POST /machine-requests` for a watch; a failure is logged and recorded, never raised."""
    watch = CapacityWatch.objects.select_related("customer__default_credential").filter(pk=watch_id).first()
    credential = selectors.customer_credential(watch.customer) if watch else None
    if watch is None or credential is None or not watch.gpu_type:
        return
    from rentals import upstream

    try:
        answer = upstream.client_for(credential).machine_request(machine_name=watch.gpu_type)
        said = f"Lium notified {answer.provider_notified_count or 0} provider(s). {answer.confirmation}".strip()
    except (UpstreamError, ValueError) as exc:
        logger.warning("The demand signal of watch %s was not accepted: %s", watch_id, exc)
        said = f"Lium's demand signal failed ({type(exc).__name__}); the watch goes on."
    CapacityWatch.objects.filter(pk=watch_id).update(demand_signal=said[:200])


def watch_cancel(*, watch: CapacityWatch) -> bool:
    """End an active watch; False when it had already ended."""
    now = timezone.now()
    return bool(
        CapacityWatch.objects.filter(pk=watch.pk, status=Status.ACTIVE).update(
            status=Status.CANCELLED, ended_at=now, outcome="Cancelled."
        )
    )


def watches_scan() -> int:
    """End the expired watches, then check every active one against its customer's cached offers (one listing
    per credential, whatever the number of watches); return how many fired."""
    now = timezone.now()
    CapacityWatch.objects.filter(status=Status.ACTIVE, expires_at__lte=now).update(
        status=Status.EXPIRED, ended_at=now, outcome="Expired before the capacity was free."
    )
    _auto_rents_resume(now)
    by_credential: dict[int, list[CapacityWatch]] = defaultdict(list)
    active = CapacityWatch.objects.filter(status=Status.ACTIVE).select_related(
        "customer__default_credential", "preset", "created_by"
    )
    for watch in active:
        credential = selectors.customer_credential(watch.customer)
        if credential is not None:
            by_credential[credential.pk].append(watch)
    fired = 0
    for watches in by_credential.values():
        credential = selectors.customer_credential(watches[0].customer)
        assert credential is not None
        try:
            listing = offers.offers_get(credential=credential)
        except (UpstreamError, ValueError) as exc:
            logger.warning("Watches of credential %s not checked now: %s", credential.pk, exc)
            continue
        for watch in watches:
            pick, _ = nodes_pick(watch.want, listing)
            if pick is not None and watch_fire(watch, pick):
                fired += 1
    return fired


def watch_fire(watch: CapacityWatch, pick: NodePick) -> bool:
    """Fire the watch once on these nodes; False when another scan fired (or someone ended) it first."""
    found = f"{len(pick.nodes)} x {pick.gpu_type} free on fabric {pick.fabric.fabric_id}"
    found += f" at ${pick.price_per_hour:.2f}/hour."
    with transaction.atomic():
        claimed = CapacityWatch.objects.filter(pk=watch.pk, status=Status.ACTIVE).update(
            status=Status.FIRED,
            ended_at=timezone.now(),
            fabric_id=pick.fabric.fabric_id,
            executor_ids=pick.executor_ids,
            outcome=found + (RENTING if watch.auto_rent else ""),
        )
        if not claimed:
            return False
        if not watch.auto_rent:
            message = f"{found} Open the rent form to take them."
            _emit(watch, pick.fabric.fabric_id, pick.executor_ids, pick.price_per_hour, message=message)
            return True
    # Claimed: this scan alone rents, outside any transaction (the order service may call Lium).
    _auto_rent_finish(watch, pick.fabric.fabric_id, pick.executor_ids, pick.price_per_hour, found=found)
    return True


def _auto_rent_finish(
    watch: CapacityWatch, fabric_id: str, executor_ids: list[str], price: Decimal | None, *, found: str
) -> None:
    rental, outcome = _watch_rent(watch, fabric_id, executor_ids)
    with transaction.atomic():
        status = Status.FIRED if rental is not None else Status.FAILED
        CapacityWatch.objects.filter(pk=watch.pk).update(status=status, rental=rental, outcome=f"{found} {outcome}")
        _emit(watch, fabric_id, executor_ids, price, message=f"{found} {outcome}", rental=rental)


def _auto_rents_resume(now: datetime) -> None:
    """Finish the auto-rents whose scan died between the claim and the order (fired, still no rental)."""
    stalled = CapacityWatch.objects.filter(
        status=Status.FIRED, auto_rent=True, rental__isnull=True, ended_at__lt=now - AUTO_RENT_RESUME_AFTER
    ).select_related("customer", "preset", "created_by")
    for watch in stalled:
        # Taken over like a lease: of two scans, the one whose update lands finishes it.
        taken = CapacityWatch.objects.filter(
            pk=watch.pk, status=Status.FIRED, rental__isnull=True, ended_at=watch.ended_at
        ).update(ended_at=now)
        if taken:
            logger.warning("Watch %s: its auto-rent lost its scan; finishing it", watch.pk)
            found = watch.outcome.removesuffix(RENTING)
            _auto_rent_finish(watch, watch.fabric_id, watch.executor_ids, None, found=found)


def watch_submit_token(watch: CapacityWatch) -> uuid.UUID:
    """The submit token of a watch's own order: the same watch never makes a second rental."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"lium-dashboard:capacity-watch:{watch.pk}")


def _watch_rent(watch: CapacityWatch, fabric_id: str, executor_ids: list[str]) -> tuple[Rental | None, str]:
    """Place the watch's order through the order service; return the rental, or None and why it was refused."""
    preset, user = watch.preset, watch.created_by
    if preset is None or user is None:
        return None, "Not rented: its preset or its maker is gone."
    # Saved before a worker died: hand it back (checking the order again would count it against itself).
    saved = Rental.objects.filter(submit_token=watch_submit_token(watch), created_by=user).first()
    if saved is not None:
        return saved, f"Rented them: rental {saved.public_id}."
    choice = OrderChoice(
        customer=watch.customer_id,
        fabric_id=fabric_id,
        executor_ids=executor_ids,
        pod_name=preset.pod_name,
        public_keys=preset.public_keys,
        template_id=preset.template_id or None,
        options={
            "initial_port_count": preset.initial_port_count,
            "termination_hours": preset.termination_hours,
            "enable_jupyter": preset.enable_jupyter,
        },
    )
    try:
        checked = order_check(user=user, choice=choice)
        rental = order_save(user=user, checked=checked, submit_token=watch_submit_token(watch))
    except OrderRefused as refused:
        return None, f"Not rented: {refused.message}"
    except UpstreamError as exc:
        return None, f"Not rented: the Lium API could not be read ({exc})."
    offers.offers_take(credential=rental.credential, node_ids=rental.executor_ids)
    return rental, f"Rented them: rental {rental.public_id}."


def _emit(
    watch: CapacityWatch,
    fabric_id: str,
    executor_ids: list[str],
    price: Decimal | None,
    *,
    message: str,
    rental: Rental | None = None,
) -> None:
    """Emit `capacity.available` once per watch (`price`: None when a resumed auto-rent no longer knows it)."""
    url = settings.SITE_URL.rstrip("/") + rent_nodes_url(
        customer_id=watch.customer_id, fabric_id=fabric_id, executor_ids=executor_ids
    )
    data = {
        "message": message,
        "watch": {"id": watch.pk, "want": watch.want.describe(), "auto_rent": watch.auto_rent},
        "fabric_id": fabric_id,
        "executor_ids": executor_ids,
        "price_per_hour": f"{price:.2f}" if price is not None else None,
        "rent_url": url,
    }
    rental_id = rental.pk if rental is not None else None
    event_emit(
        customer=watch.customer_id,
        type=ev.CAPACITY_AVAILABLE,
        data=data,
        rental_id=rental_id,
        dedup_key=f"watch:{watch.pk}",
    )
