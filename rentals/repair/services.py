"""Member repair: Reboot member and Reset GPUs, asked by a rental's customer or an operator.

A click records one timeline event (who, which member, why; `data.repair_token` names the click) and enqueues one
task. The event is the request's row: its `data.state` moves asked → sending by a conditional UPDATE, so of a
double delivery or a retried task exactly one sends, and a click whose token is already recorded (a double
click, a resubmitted form) is the same request. A call that may have reached Lium is never sent again: without
an answer the request ends `unknown` and the member's status says what happened.

- Reboot (`POST /pods/{id}/reboot`): the member shows REBOOT_PENDING ("rebooting") at once; the pod poller then
  follows it (`rentals.tracking.members`) back to RUNNING, or to REBOOT_FAILED, which degrades the rental as any
  failed member does; `member_reboot_settled` writes how it ended on the timeline.
- Reset GPUs (`POST /pods/{id}/reset-gpu`, all GPUs): polled every RESET_POLL_SECONDS, at most RESET_WAIT_SECONDS
  (Lium gives up at 300 s); the per-GPU result lands on the request and the timeline. Lium allows one a minute per
  pod: a click within the minute is refused here with the seconds left, and Lium's own 429 is worded the same.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import is_operator
from rentals.audit import staff_action_event
from rentals.enqueue import repair_send_enqueue
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.states import HOLDS_CLUSTER_STATES
from rentals.transitions import rental_touch

REBOOT, RESET_GPU = "reboot", "reset_gpu"
ACTIONS = {REBOOT: "Reboot", RESET_GPU: "GPU reset"}
RESET_INTERVAL_SECONDS = 60  # Lium: one GPU reset per minute per pod (§17)
RESET_POLL_SECONDS = 3.0  # as the official client polls
RESET_WAIT_SECONDS = 330  # Lium times a reset out at 300 s; the official client waits 330 s
PENDING_STATES = ("asked", "sending", "running")
# A request still pending after this long lost its worker for good: it no longer blocks a new click, and the
# sweeper, which reads this window off the timeline's time index, no longer looks at it.
PENDING_FOR_AT_MOST = timedelta(hours=1)
REASON_MAX = 1000
TOKEN_MAX = 100
REPAIRS_SHOWN = 10

# What each state of a request says on the page.
STATE_TEXT = {
    "asked": "asked, about to be sent",
    "sending": "being sent to Lium",
    "sent": "rebooting",
    "running": "resetting",
    "running_again": "running again",
    "failed": "failed",
    "done": "done",
    "timeout": "timed out",
    "refused": "refused",
    "unknown": "no answer from Lium",
}


def reset_wait_message(seconds: int) -> str:
    return f"Lium allows one GPU reset per minute per node; try again in {seconds} s."


def repair_member(*, rental: Rental, rank: Any) -> ClusterMember:
    """Return the live member of `rank` that may be repaired now, or raise ValidationError saying why not."""
    if rental.status not in HOLDS_CLUSTER_STATES:
        raise ValidationError(
            f"A {rental.get_status_display().lower()} rental has no running members to repair.", code="not_repairable"
        )
    text = str(rank if rank is not None else "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 4:
        raise ValidationError("The rank must be a whole number from 0.", code="invalid_rank")
    member = ClusterMember.objects.filter(rental=rental, rank=int(text), gone_at__isnull=True).first()
    if member is None:
        ranks = sorted(m.rank for m in rental.members.filter(gone_at__isnull=True) if m.rank is not None)
        known = f"its members are ranks {', '.join(map(str, ranks))}" if ranks else "it has no listed members yet"
        raise ValidationError(f"This cluster has no member of rank {text}: {known}.", code="invalid_rank")
    if member.status != "RUNNING":
        status = "rebooting" if member.status == "REBOOT_PENDING" else (member.status or "not listed yet")
        raise ValidationError(
            f"Rank {member.rank} is {status}, not running: only a running member can be repaired.",
            code="member_not_running",
        )
    return member


def member_repair_ask(
    *, rental: Rental, rank: Any, action: str, actor: User | None, reason: str = "", token: str = ""
) -> tuple[RentalEvent, bool]:
    """Record one click on Reboot or Reset GPUs and enqueue its one upstream call.

    Return the request's event and whether this call created it (False: the same click, `token`, was recorded
    already). Raise ValidationError (with a `code`) when the member may not be repaired now.
    """
    if action not in ACTIONS:
        raise ValidationError("Choose reboot or reset-gpu.", code="invalid_action")
    token = (token or str(uuid.uuid4()))[:TOKEN_MAX]
    reason = reason.replace("\x00", "").strip()[:REASON_MAX]
    with transaction.atomic():
        member = repair_member(rental=rental, rank=rank)
        # Serialises clicks on one member (SQLite's transactions already are), so a double click records once.
        ClusterMember.objects.select_for_update().filter(pk=member.pk).first()
        same = RentalEvent.objects.filter(rental_id=rental.pk, data__repair_token=token).first()
        if same is not None:
            return same, False
        _refuse_while_pending(rental=rental, member=member, action=action)
        event = RentalEvent.objects.create(rental_id=rental.pk, **_ask_event(member, action, actor, reason, token))
        rental_touch(rental_id=rental.pk)
        transaction.on_commit(lambda: repair_send_enqueue(event.pk))
    return event, True


def _ask_event(member: ClusterMember, action: str, actor: User | None, reason: str, token: str) -> dict[str, Any]:
    who = actor.get_username() if actor is not None else "the dashboard"
    message = f"{ACTIONS[action]} of rank {member.rank} (pod {member.pod_id}) asked by {who}."
    message += f" Reason: {reason}" if reason else ""
    data = {
        "repair": action,
        "repair_token": token,
        "pod_id": member.pod_id,
        "rank": member.rank,
        "reason": reason,
        "state": "asked",
    }
    if actor is not None and is_operator(actor):
        return staff_action_event(actor=actor, action=f"member_{action}", reason=reason, message=message, data=data)
    return {"kind": RentalEvent.Kind.MEMBER, "actor": actor, "message": message, "data": data}


def _refuse_while_pending(*, rental: Rental, member: ClusterMember, action: str) -> None:
    """Refuse a second request while one of the same kind is under way, and a reset within Lium's minute."""
    mine = RentalEvent.objects.filter(rental_id=rental.pk, data__repair=action, data__pod_id=member.pod_id)
    if mine.filter(data__state__in=PENDING_STATES, at__gte=timezone.now() - PENDING_FOR_AT_MOST).exists():
        raise ValidationError(
            f"A {ACTIONS[action].lower()} of rank {member.rank} is already under way: follow it on this page.",
            code="repair_in_progress",
        )
    if action == RESET_GPU:
        wait = reset_wait_seconds(rental=rental, member=member)
        if wait:
            raise ValidationError(reset_wait_message(wait), code="reset_rate_limited", params={"seconds": wait})


def reset_wait_seconds(*, rental: Rental, member: ClusterMember) -> int:
    """Return how many seconds until Lium takes another GPU reset of this member (0: now)."""
    since = timezone.now() - timedelta(seconds=RESET_INTERVAL_SECONDS)
    last = (
        RentalEvent.objects.filter(rental_id=rental.pk, data__repair=RESET_GPU, data__pod_id=member.pod_id)
        .filter(data__has_key="sent_at", at__gte=since)
        .order_by("-at", "-id")
        .first()
    )
    if last is None:
        return 0
    sent = datetime.fromisoformat(last.data["sent_at"])
    left = RESET_INTERVAL_SECONDS - (timezone.now() - sent).total_seconds()
    return max(0, math.ceil(left))


def repair_advance(event_id: int, *, from_state: str, turn: int | None = None, **changes: Any) -> dict | None:
    """Move a request from `from_state` (and poll `turn`) with a conditional UPDATE; return its new data if this
    caller moved it, else None (someone else did, or it is elsewhere)."""
    event = RentalEvent.objects.filter(pk=event_id).first()
    if event is None or not isinstance(event.data, dict) or event.data.get("state") != from_state:
        return None
    if turn is not None and event.data.get("polls") != turn:
        return None
    data = {**event.data, **changes}
    rows = RentalEvent.objects.filter(pk=event_id, data__state=from_state)
    if turn is not None:
        rows = rows.filter(data__polls=turn)
    return data if rows.update(data=data) == 1 else None


def repairs_recent(rental: Rental) -> list[dict[str, Any]]:
    """Return the rental's newest repair requests for its page: who asked what of which rank, and how it went."""
    events = (
        RentalEvent.objects.filter(rental_id=rental.pk, data__has_key="repair_token")
        .select_related("actor")
        .order_by("-at", "-id")[:REPAIRS_SHOWN]
    )
    return [
        {
            "at": event.at,
            "what": ACTIONS.get(event.data.get("repair"), "Repair"),
            "rank": event.data.get("rank"),
            "who": event.actor.get_username() if event.actor else "",
            "state": event.data.get("state", ""),
            "state_text": STATE_TEXT.get(event.data.get("state", ""), event.data.get("state", "")),
            "outcome": event.data.get("outcome", ""),
            "gpus": [gpu for gpu in event.data.get("gpus", []) if isinstance(gpu, dict)],
        }
        for event in events
    ]
