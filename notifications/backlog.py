"""How much an endpoint may have waiting: at most WEBHOOK_MAX_PENDING_PER_ENDPOINT pending deliveries.

An endpoint at a host that never answers would otherwise pile up deliveries, each retried for 24 h on the
housekeeping workers. Beyond the cap the oldest pending are given up (the newest events describe the current
state); the log names why, and each can be redelivered once the endpoint answers again.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from notifications.models import Delivery

GIVEN_UP_FOR_BACKLOG = (
    "Given up unsent: more than {cap} deliveries were pending for this endpoint, so the oldest were dropped "
    "(redeliver it once the endpoint answers)."
)
# Deliveries given up per endpoint in one go (a cap lowered at runtime catches up over the next events).
_BATCH = 500


def backlog_trim(*, endpoint_ids: Iterable[int | None]) -> int:
    """Give up the oldest pending deliveries of each endpoint beyond the cap; return how many were given up."""
    cap = settings.WEBHOOK_MAX_PENDING_PER_ENDPOINT
    now = timezone.now()
    given_up = 0
    for endpoint_id in {pk for pk in endpoint_ids if pk is not None}:
        pending = Delivery.objects.filter(endpoint_id=endpoint_id, status=Delivery.Status.PENDING)
        beyond = list(pending.order_by("-created_at", "-id").values_list("pk", flat=True)[cap : cap + _BATCH])
        if not beyond:
            continue
        # A delivery a worker holds right now is left to settle; the next trim catches it if it retries.
        given_up += (
            pending.filter(pk__in=beyond)
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
            .update(
                status=Delivery.Status.FAILED,
                next_attempt_at=None,
                lease_until=None,
                last_error=GIVEN_UP_FOR_BACKLOG.format(cap=cap),
            )
        )
    return given_up
