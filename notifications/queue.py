"""Put a delivery on the broker, by task name (so services and delivery code need not import the tasks).

Enqueueing never raises into a caller: a delivery whose message is lost (the broker was down, a worker died)
stays pending in its row and `notifications.tasks.deliveries_sweep` enqueues it again.
"""

from __future__ import annotations

import logging

from celery import current_app

logger = logging.getLogger(__name__)

DELIVERY_TASK = "notifications.tasks.delivery_send"


def delivery_enqueue(delivery_id: int, countdown: float | None = None) -> None:
    try:
        current_app.send_task(DELIVERY_TASK, args=(delivery_id,), countdown=countdown)
    except Exception:  # the broker is down or unreachable: the sweeper will re-enqueue from the row
        logger.warning("Could not enqueue delivery %s; the sweeper will pick it up.", delivery_id, exc_info=True)
