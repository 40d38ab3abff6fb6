"""Follow each credential's account events (`GET /users/me/events`) and hand them to `rentals.tracking.outside`.

The route has no cursor: each follow asks `since` the newest time it saw (inclusive) and drops the events it saw at
exactly that time by digest (`PodEventCursor`). The first follow of a credential looks back
FIRST_LOOK_BACK. A 401 (the backend does not open events to API keys) is reported once and asked again only after
LIUM_EVENTS_REFUSED_RETRY_SECONDS, never in a loop. Events about pods no rental holds are kept for operators.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import UpstreamCredential
from ops.models import PodEventCursor, UnheldPodEvent
from rentals import upstream
from rentals.tracking.outside import event_source, pod_events_apply
from rentals.upstream.parse_events import AccountEvent

logger = logging.getLogger(__name__)

FIRST_LOOK_BACK = timedelta(hours=1)
EVENTS_LIMIT = 1000  # the most one ask returns (the CLI's upper bound)


def _take_turn(credential_id: int, now: datetime) -> PodEventCursor | None:
    """Return the credential's cursor if this caller won this interval's follow (a conditional UPDATE), else None."""
    PodEventCursor.objects.get_or_create(credential_id=credential_id)
    gap = timedelta(seconds=settings.LIUM_EVENTS_POLL_SECONDS / 2)
    refused_wait = timedelta(seconds=settings.LIUM_EVENTS_REFUSED_RETRY_SECONDS)
    due = Q(polled_at__isnull=True) | Q(polled_at__lte=now - gap)
    asking_again = Q(refused_at__isnull=True) | Q(polled_at__lte=now - refused_wait)
    won = PodEventCursor.objects.filter(due, asking_again, credential_id=credential_id).update(polled_at=now)
    return PodEventCursor.objects.get(credential_id=credential_id) if won else None


def credential_events_follow(*, credential_id: int) -> int | None:
    """Read the credential's new events, apply them, keep the unheld ones; return how many were new (None: not
    this caller's turn, or the events could not be read)."""
    now = timezone.now()
    credential = UpstreamCredential.objects.filter(pk=credential_id, active=True).first()
    cursor = _take_turn(credential_id, now) if credential is not None else None
    if credential is None or cursor is None:
        return None
    since = cursor.since or now - FIRST_LOOK_BACK
    try:
        events = upstream.client_for(credential).account_events(since=since.isoformat(), limit=EVENTS_LIMIT)
    except upstream.AuthenticationFailed as exc:
        _refused(cursor, exc, now)
        return None
    except (upstream.UpstreamError, ValueError) as exc:
        logger.warning("The events of credential %s could not be read (%s); asking again next time.", credential, exc)
        return None
    if len(events) >= EVENTS_LIMIT:
        logger.warning(
            "Credential %s: %s or more events since %s; older ones may be missed.", credential, EVENTS_LIMIT, since
        )
    seen = set(cursor.seen) if cursor.since else set()
    new = [e for e in events if not (e.created_at <= since and (e.created_at < since or e.digest in seen))]
    with transaction.atomic():
        unheld = pod_events_apply(credential_id=credential_id, events=new)
        _unheld_store(credential_id, unheld)
        _advance(cursor, events, since=since, seen=seen)
    return len(new)


def _advance(cursor: PodEventCursor, events: list[AccountEvent], *, since: datetime, seen: set[str]) -> None:
    """Keep the newest time seen and the digests of the events at exactly that time; a refusal is over."""
    newest = max((event.created_at for event in events), default=since)
    at_newest = {event.digest for event in events if event.created_at == newest}
    cursor.seen = sorted(at_newest | seen) if newest == since else sorted(at_newest)
    cursor.since = newest
    cursor.refused_at, cursor.refused_message = None, ""
    cursor.save(update_fields=["since", "seen", "refused_at", "refused_message"])


def _refused(cursor: PodEventCursor, exc: upstream.UpstreamError, now: datetime) -> None:
    """Report once that the backend refuses events to this credential; the follow waits until asked again."""
    if cursor.refused_at is None:
        logger.warning(
            "Lium refused the account events to credential %s (401: the backend does not open events to API keys); "
            "changes made outside the dashboard are not followed for it. Asking again in %s s.",
            cursor.credential_id,
            settings.LIUM_EVENTS_REFUSED_RETRY_SECONDS,
        )
        cursor.refused_at = now
    cursor.refused_message = exc.message[:500]
    cursor.save(update_fields=["refused_at", "refused_message"])


def _unheld_store(credential_id: int, events: list[AccountEvent]) -> None:
    UnheldPodEvent.objects.bulk_create(
        [
            UnheldPodEvent(
                credential_id=credential_id,
                digest=event.digest,
                happened_at=event.created_at,
                pod_id=event.pod_id,
                pod_name=event.pod_name,
                sub_event_type=event.sub_event_type,
                source=event_source(event)[:120],
                detail=event.detail,
                error=event.error,
            )
            for event in events
        ],
        ignore_conflicts=True,
    )
