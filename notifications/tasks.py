"""Celery tasks for the outbox: thin, primary keys in, one service call each.

A delivery whose message is lost (the broker was down, a worker died) is found again by `deliveries_sweep`,
which beat runs every WEBHOOK_SWEEP_INTERVAL_SECONDS.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from notifications import delivery, services
from notifications.models import Delivery
from notifications.queue import delivery_enqueue


@shared_task(acks_late=True, reject_on_worker_lost=True)
def delivery_send(delivery_id: int) -> str:
    """Make one attempt at a delivery if it is due (a duplicate message finds nothing to claim)."""
    return delivery.delivery_attempt(delivery_id=delivery_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def deliveries_sweep() -> int:
    """Re-enqueue pending deliveries that are overdue (their message was lost) or whose worker died."""
    now = timezone.now()
    # A delivery's own delayed message normally arrives on time; only one overdue by this much was lost.
    overdue = now - timedelta(seconds=max(2 * settings.WEBHOOK_SWEEP_INTERVAL_SECONDS, 10))
    due = list(
        Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=overdue)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .values_list("pk", flat=True)[:500]
    )
    for delivery_id in due:
        delivery_enqueue(delivery_id)
    # Mark them, so the next sweeps wait a full grace period before sending another copy.
    Delivery.objects.filter(pk__in=due, status=Delivery.Status.PENDING, next_attempt_at__lte=overdue).update(
        next_attempt_at=now
    )
    return len(due)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def removal_soon_scan() -> int:
    """Emit `rental.removal_soon` for clusters whose scheduled removal falls within the next hour."""
    return services.removal_soon_emit()
