"""Beat tasks of the staff side: following each credential's account events (thin, one service call each)."""

from __future__ import annotations

import logging

from celery import shared_task

from accounts.models import UpstreamCredential
from ops import pod_events

logger = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def pod_events_follow_all() -> int:
    """Enqueue one follow per active credential on the tracking queue; return how many."""
    ids = list(UpstreamCredential.objects.filter(active=True).values_list("pk", flat=True))
    for credential_id in ids:
        try:
            credential_events_follow.apply_async((credential_id,))
        except Exception:  # the broker is down: beat asks again next interval
            logger.warning("Could not enqueue the events follow of credential %s.", credential_id, exc_info=True)
    return len(ids)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def credential_events_follow(credential_id: int) -> int:
    """Follow one credential's account events once (at most once per interval, whoever asks)."""
    return pod_events.credential_events_follow(credential_id=credential_id) or 0
