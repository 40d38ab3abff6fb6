"""Lium's cluster switch: `multinode_clusters_enabled` of `GET {base URL}/v1/shared-config`, read by beat.

Read periodically (`cluster_switch_read`, every LIUM_SWITCH_READ_SECONDS), never per request. Only an explicit
`false` switches renting off: an absent field or an unreadable config never blocks it (lium-core defaults the
field to off, but the rent call itself is the authority, and a 403 from it is classified as any other).
While the last reading of a base URL said off, a `Heartbeat` row holds it (`at`: first read off; `lease_until`:
when the reading goes stale, so a stopped beat never leaves renting blocked), so every process sees it.
Queued rentals are held, not sent (`rental_hold`), and refused after LIUM_SWITCH_MAX_WAIT_SECONDS.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import UpstreamCredential
from rentals import upstream
from rentals.models import Heartbeat, Rental, RentalEvent
from rentals.states import RentalStatus
from rentals.transitions import rental_touch, rental_transition

logger = logging.getLogger(__name__)

SWITCH_OFF_CODE = "cluster_renting_disabled"
SWITCH_OFF_MESSAGE = "Lium has switched cluster renting off"
WAITING_MESSAGE = f"{SWITCH_OFF_MESSAGE}; waiting. The order is kept and sent once Lium switches it back on."
# A reading is believed for this many read intervals; then renting is on again until the next reading.
STALE_AFTER_READS = 5


def _row_name(base_url: str) -> str:
    return "cluster-renting-off:" + hashlib.sha256(base_url.encode()).hexdigest()[:32]


def cluster_switch_read(*, now: datetime | None = None) -> dict[str, bool | None]:
    """Read the switch of every base URL an active credential uses; return each reading (None: absent or
    unreadable, which never blocks renting)."""
    now = now or timezone.now()
    base_urls = {credential.effective_base_url for credential in UpstreamCredential.objects.filter(active=True)}
    readings: dict[str, bool | None] = {}
    for base_url in sorted(base_urls):
        try:
            readings[base_url] = upstream.public_client(base_url).cluster_switch()
        except upstream.UpstreamError as exc:
            logger.warning(
                "Lium's shared config at %s could not be read (%s); cluster renting stays on.", base_url, exc
            )
            readings[base_url] = None
        _store(base_url, off=readings[base_url] is False, now=now)
    return readings


def _store(base_url: str, *, off: bool, now: datetime) -> None:
    name = _row_name(base_url)
    if not off:
        Heartbeat.objects.filter(name=name).delete()
        return
    until = now + timedelta(seconds=STALE_AFTER_READS * settings.LIUM_SWITCH_READ_SECONDS)
    # A fresh reading keeps the time it was first read off; a stale one starts again.
    if not Heartbeat.objects.filter(name=name, lease_until__gt=now).update(lease_until=until):
        Heartbeat.objects.update_or_create(name=name, defaults={"at": now, "lease_until": until})


def cluster_renting_off_since(*, credential: UpstreamCredential | None) -> datetime | None:
    """Return since when Lium has switched cluster renting off for this credential's backend, or None (on)."""
    if credential is None:
        return None
    name = _row_name(credential.effective_base_url)
    return Heartbeat.objects.filter(name=name, lease_until__gt=timezone.now()).values_list("at", flat=True).first()


def rental_hold(rental: Rental) -> str | None:
    """Hold a queued rental while the switch is off: None when it may be sent (or is not queued: a sent order's
    retry is Lium's to refuse); "" when it waits (its timeline says why once); `refused` once it has waited
    LIUM_SWITCH_MAX_WAIT_SECONDS (nothing was sent)."""
    if rental.status != RentalStatus.QUEUED:
        return None
    since = cluster_renting_off_since(credential=rental.credential)
    if since is None:
        return None
    now = timezone.now()
    # A scheduled rental waits from its start time, not from when it was ordered (days earlier, perhaps).
    waited = now - max(since, rental.start_at or rental.created_at)
    if waited.total_seconds() > settings.LIUM_SWITCH_MAX_WAIT_SECONDS:
        hours = settings.LIUM_SWITCH_MAX_WAIT_SECONDS / 3600
        message = (
            f"Not sent: {SWITCH_OFF_MESSAGE} for more than {hours:g} h. Nothing was rented; "
            "order again once renting is back on."
        )
        moved = rental_transition(
            rental_id=rental.pk,
            from_status=RentalStatus.QUEUED,
            to_status=RentalStatus.REFUSED,
            message=message,
            data={"reason": SWITCH_OFF_CODE},
            error_code=SWITCH_OFF_CODE,
            error_message=message,
            error_hint="",
        )
        return RentalStatus.REFUSED if moved else ""
    if rental.error_code != SWITCH_OFF_CODE:
        with transaction.atomic():
            said = rental_touch(
                rental_id=rental.pk,
                in_status=RentalStatus.QUEUED,
                error_code=SWITCH_OFF_CODE,
                error_message=WAITING_MESSAGE,
                error_hint=f"Orders waiting longer than {settings.LIUM_SWITCH_MAX_WAIT_SECONDS // 60} minutes "
                "are refused (nothing is sent).",
            )
            if said:
                RentalEvent.objects.create(
                    rental_id=rental.pk,
                    kind=RentalEvent.Kind.ATTEMPT,  # about sending it, though its state stays queued
                    message=WAITING_MESSAGE,
                    data={"reason": SWITCH_OFF_CODE},
                )
    return ""


def claim_clears(rental: Rental) -> dict[str, str]:
    """Return the fields a claim clears: the waiting notice, once the rental is sent after all."""
    if rental.error_code != SWITCH_OFF_CODE:
        return {}
    return {"error_code": "", "error_message": "", "error_hint": ""}
