"""The worker's side of member repair (`rentals.repair.services` records the clicks): send the one upstream call, poll a
GPU reset until it ends, and write how a reboot ended once the pod poller sees the member settle.

Every step first moves the request's event with a conditional UPDATE (`repair_advance`): a redelivered or retried
message finds the request moved on and does nothing, so no click reaches Lium twice.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rentals import upstream
from rentals.enqueue import pods_sync_enqueue, repair_send_enqueue, reset_poll_enqueue
from rentals.models import ClusterMember, RentalEvent
from rentals.repair.services import (
    ACTIONS,
    PENDING_FOR_AT_MOST,
    PENDING_STATES,
    REBOOT,
    RESET_INTERVAL_SECONDS,
    RESET_POLL_SECONDS,
    RESET_WAIT_SECONDS,
    repair_advance,
    reset_wait_message,
)
from rentals.transitions import rental_touch
from rentals.upstream.parse_repair import ResetStatus

logger = logging.getLogger(__name__)

LOST_AFTER_SECONDS = 60  # a request untouched this long lost its message (a poll's comes every 3 s)
LOST_PER_SWEEP = 100


def member_repair_send(*, event_id: int) -> str:
    """Claim the request and make its one upstream call; return what happened ("not-due": someone else has it)."""
    data = repair_advance(event_id, from_state="asked", state="sending", sending_at=timezone.now().isoformat())
    if data is None:
        return "not-due"
    event = RentalEvent.objects.select_related("rental__credential").get(pk=event_id)
    rental, pod_id, what = event.rental, str(data["pod_id"]), ACTIONS[data["repair"]]
    sent_at = timezone.now().isoformat()
    try:
        client = upstream.client_for(rental.credential)
        if data["repair"] == REBOOT:
            client.pod_reboot(pod_id)
            started = None
        else:
            started = client.pod_reset_gpu(pod_id)
    except upstream.RateLimited as exc:
        wait = math.ceil(exc.retry_after) if exc.retry_after else RESET_INTERVAL_SECONDS
        slow_down = f"Lium asked to slow down; try again in {wait} s."
        said = slow_down if data["repair"] == REBOOT else reset_wait_message(wait)
        return _settle(event, "refused", said, outcome=said)
    except upstream.UpstreamRejected as exc:
        said = f"Lium refused the {what.lower()}: {exc.message}"
        return _settle(event, "refused", said, outcome=said)
    except (upstream.UpstreamError, ValueError) as exc:
        # It may have reached Lium: never sent again (a second reboot is worse than none); the status will say.
        said = f"Lium did not answer the {what.lower()} ({exc}); it may or may not have started: watch the member."
        return _settle(event, "unknown", said, outcome="no answer from Lium", sent_at=sent_at)
    if started is None:
        return _reboot_sent(event, sent_at)
    return _reset_started(event, started, sent_at)


def _settle(event: RentalEvent, state: str, message: str, *, from_state: str = "sending", **changes: Any) -> str:
    """Move the request to `state` and put `message` on the timeline (once: only the mover writes it)."""
    with transaction.atomic():
        data = repair_advance(event.pk, from_state=from_state, state=state, **changes)
        if data is None:
            return "not-due"
        RentalEvent.objects.create(
            rental_id=event.rental_id,
            kind=RentalEvent.Kind.MEMBER,
            message=message,
            data={
                "repair_of": event.pk,
                "pod_id": data.get("pod_id"),
                "rank": data.get("rank"),
                "state": state,
                **({"gpus": changes["gpus"]} if "gpus" in changes else {}),
            },
        )
        rental_touch(rental_id=event.rental_id)
    return state


def _reboot_sent(event: RentalEvent, sent_at: str) -> str:
    rank = event.data.get("rank")
    with transaction.atomic():
        # Shown as rebooting at once; the pod poller follows it from here (back to RUNNING or REBOOT_FAILED).
        ClusterMember.objects.filter(pod_id=event.data["pod_id"], status="RUNNING").update(status="REBOOT_PENDING")
        state = _settle(
            event, "sent", f"Reboot of rank {rank} accepted by Lium: following it until it runs again.", sent_at=sent_at
        )
    transaction.on_commit(
        lambda: pods_sync_enqueue(event.rental.credential_id, countdown=settings.POD_POLL_MIN_INTERVAL_SECONDS)
    )
    return state


def _reset_started(event: RentalEvent, started: ResetStatus, sent_at: str) -> str:
    rank = event.data.get("rank")
    message = f"GPU reset of rank {rank} started at Lium (request {started.request_id}); waiting for its result."
    state = _settle(event, "running", message, sent_at=sent_at, lium_request_id=started.request_id, polls=0)
    if state == "running":
        transaction.on_commit(lambda: reset_poll_enqueue(event.pk, 0, countdown=RESET_POLL_SECONDS))
    return state


def member_reset_gpu_poll(*, event_id: int, turn: int) -> float | None:
    """Read a running GPU reset once (this turn only); return in how many seconds to read again, or None."""
    data = repair_advance(event_id, from_state="running", turn=turn, polls=turn + 1)
    if data is None:
        return None
    event = RentalEvent.objects.select_related("rental__credential").get(pk=event_id)
    waited = (timezone.now() - datetime.fromisoformat(data["sent_at"])).total_seconds()
    try:
        status = upstream.client_for(event.rental.credential).pod_reset_gpu_status(
            str(data["pod_id"]), str(data["lium_request_id"])
        )
    except (upstream.UpstreamError, ValueError) as exc:
        logger.warning("GPU reset %s: reading its status failed: %s", data.get("lium_request_id"), exc)
        status = None
    if status is not None and status.final:
        _reset_finished(event, status)
        return None
    if waited >= RESET_WAIT_SECONDS:
        said = f"Lium gave no result for the GPU reset of rank {data.get('rank')} within {RESET_WAIT_SECONDS} s."
        _settle(event, "timeout", said, from_state="running", outcome=said)
        return None
    return RESET_POLL_SECONDS


def _reset_finished(event: RentalEvent, status: ResetStatus) -> None:
    gpus = [{"index": g.index, "uuid": g.uuid, "result": g.result, "detail": g.detail} for g in status.gpus]
    results = ", ".join(f"GPU {g.index} {g.result.replace('_', ' ')}" for g in status.gpus) or "no GPU listed"
    outcome = {"done": "done", "failed": "failed", "timeout": "timed out at Lium"}[status.status]
    message = f"GPU reset of rank {event.data.get('rank')} {outcome}: {results}."
    if status.error_message:
        message += f" Lium said: {status.error_message}"
    if status.container_restarted:
        message += " The container was restarted."
    _settle(
        event,
        status.status,
        message,
        from_state="running",
        outcome=message,
        gpus=gpus,
        ok=status.ok,
        container_restarted=status.container_restarted,
    )


def member_reboot_settled(member: ClusterMember, new_status: str, *, row_updated_at: datetime | None = None) -> bool:
    """Write on the timeline how a member's reboot ended (the pod poller calls it when a listing shows the member
    out of REBOOT_PENDING); return False, writing nothing, for a row last changed before the reboot was sent (a
    listing read before it): the member is still rebooting."""
    asked = (
        RentalEvent.objects.filter(rental_id=member.rental_id, data__repair=REBOOT, data__pod_id=member.pod_id)
        .filter(data__state="sent")
        .order_by("-at", "-id")
        .first()
    )
    sent_at = _when(asked.data.get("sent_at")) if asked is not None else None
    if sent_at is not None and row_updated_at is not None and row_updated_at < sent_at:
        return False
    running = new_status == "RUNNING"
    ended = "runs again" if running else f"is {new_status}"
    message = f"Rank {member.rank} {ended} after its reboot."
    if asked is not None:
        state = "running_again" if running else "failed"
        if _settle(asked, state, message, from_state="sent", outcome=message) != "not-due":
            return True
    RentalEvent.objects.create(
        rental_id=member.rental_id,
        kind=RentalEvent.Kind.MEMBER,
        message=message,
        data={"pod_id": member.pod_id, "rank": member.rank, "reboot_ended": new_status},
    )
    return True


def repairs_sweep() -> int:
    """Recover requests whose message was lost (called by the sweeper); return how many it touched.

    A click never taken is enqueued again and a reset's lost poll restarts at its turn (copies find nothing to
    claim). A send whose worker died during the call ends `unknown` after the lease, never sent again: the
    member's status says whether it happened, and the customer may click again.
    """
    now = timezone.now()
    stale = RentalEvent.objects.filter(
        at__range=(now - PENDING_FOR_AT_MOST, now - timedelta(seconds=LOST_AFTER_SECONDS)),
        kind__in=(RentalEvent.Kind.MEMBER, RentalEvent.Kind.STAFF_ACTION),
        data__has_key="repair_token",
        data__state__in=PENDING_STATES,
    ).order_by("at")[:LOST_PER_SWEEP]
    touched = 0
    for event in stale:
        state = event.data.get("state")
        if state == "asked":
            repair_send_enqueue(event.pk)
        elif state == "running":
            reset_poll_enqueue(event.pk, int(event.data.get("polls") or 0))
        elif _older_than(event.data.get("sending_at"), now, settings.RENT_LEASE_SECONDS):
            said = f"The {ACTIONS.get(event.data.get('repair'), 'repair').lower()} may or may not have reached Lium "
            said += "(the worker sending it stopped); watch the member's status and ask again if needed."
            _settle(event, "unknown", said, outcome="no answer from Lium")
        else:
            continue
        touched += 1
    return touched


def _when(iso: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(iso))
    except ValueError:
        return None


def _older_than(iso: object, now: datetime, seconds: float) -> bool:
    when = _when(iso)
    # No claim time: it has waited since the click at least.
    return when is None or now - when > timedelta(seconds=seconds)
