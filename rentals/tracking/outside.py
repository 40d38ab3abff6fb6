"""Changes made outside the dashboard, as the account's events tell them (`GET /users/me/events`).

Every event about a pod one of our rentals holds lands on its timeline with its source (portal, CLI, an API key,
the schedule). A removal or schedule change nobody here asked for moves the rental to what the event proves:
every member removed → terminated (through terminating, so the customer's usual webhooks and e-mails go out),
some → degraded; a new removal time is adopted. A reboot proves no failure and a removal this dashboard asked for
(the rental is `terminating`) is ours: both are only recorded. Events about pods no rental holds are handed back
for the operators' list.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from rentals.enqueue import removal_push_enqueue
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.states import HOLDS_CLUSTER_STATES, RentalStatus
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream.parse import timestamp
from rentals.upstream.parse_events import AccountEvent

REMOVED = ("pod-delete.started", "pod-delete.success")
SCHEDULE = ("pod-removal-schedule.set", "pod-removal-schedule.cancelled")
# A rented cluster's pods may not be members yet (its rent answer names them); later ones are found by member.
NOT_YET_LISTED = RentalStatus.RENTED


def event_source(event: AccountEvent) -> str:
    """Return who made the change, in a customer's words: portal, CLI, an API key, the schedule, or Lium."""
    actor = event.actor
    if actor is None:
        scheduled = event.detail.get("reason") == "scheduled_removal"
        return "the removal schedule" if scheduled else "Lium"
    auth = actor["auth"]
    if auth == "api_key":
        return f"API key '{actor['api_key_name'] or actor['api_key_id'] or 'unnamed'}'"
    return {"session": "the Lium portal", "cli": "the Lium CLI"}.get(auth, auth or "an unknown client")


def rentals_by_pod(*, credential_id: int, pod_ids: set[str]) -> dict[str, int]:
    """Return which rental of this credential holds each of these pods (its members, or the rent answer's ids)."""
    held = dict(ClusterMember.objects.filter(pod_id__in=pod_ids).values_list("pod_id", "rental_id"))
    rest = pod_ids - held.keys()
    if rest:
        starting = Rental.objects.filter(credential_id=credential_id, status=NOT_YET_LISTED)
        for rental_id, rental_pods in starting.values_list("pk", "pod_ids"):
            held.update({pod_id: rental_id for pod_id in set(rental_pods or []) & rest})
    return held


def pod_events_apply(*, credential_id: int, events: list[AccountEvent]) -> list[AccountEvent]:
    """Record each event on its rental's timeline and apply what it proves; return those no rental holds.

    The whole batch is on the timelines first, so a cluster whose members were all removed since the last look
    ends terminated at once, not degraded on the way.
    """
    holders = rentals_by_pod(credential_id=credential_id, pod_ids={event.pod_id for event in events})
    held = [(holders[event.pod_id], event) for event in events if event.pod_id in holders]
    with transaction.atomic():
        RentalEvent.objects.bulk_create(
            [
                RentalEvent(
                    rental_id=rental_id,
                    kind=RentalEvent.Kind.MEMBER,
                    message=f"Lium: {event.sub_event_type} of pod {event.pod_id}, by {event_source(event)}.",
                    data={"lium_event": event.as_dict(), "source": event_source(event)},
                )
                for rental_id, event in held
            ]
        )
        for rental_id, event in held:
            if event.sub_event_type in (*REMOVED, *SCHEDULE):  # the others (creation, a reboot) are recorded only
                _apply(Rental.objects.get(pk=rental_id), event)  # as the previous event left it
    return [event for event in events if event.pod_id not in holders]


def _apply(rental: Rental, event: AccountEvent) -> None:
    """Move the rental to what a removal or schedule change nobody here asked for proves."""
    if rental.status not in HOLDS_CLUSTER_STATES:
        return  # being removed by us, or over: the event is on the timeline and that is all
    if event.sub_event_type in REMOVED:
        _removed_outside(rental, event)
    elif event.sub_event_type in SCHEDULE:
        _schedule_outside(rental, event)


def _removed_outside(rental: Rental, event: AccountEvent) -> None:
    """Every member removed (this event and earlier ones on the timeline) → terminated; some → degraded."""
    who = event_source(event)
    pods = set(rental.pod_ids or []) | set(rental.members.values_list("pod_id", flat=True))
    recorded = RentalEvent.objects.filter(rental=rental, kind=RentalEvent.Kind.MEMBER).values_list("data", flat=True)
    earlier = [data.get("lium_event") or {} for data in recorded if isinstance(data, dict)]
    removed_at = {event.pod_id: event.created_at}
    for seen in earlier:
        at = timestamp(seen.get("created_at")) if seen.get("sub_event_type") in REMOVED else None
        if at is not None and (seen.get("pod_id") not in removed_at or at < removed_at[seen["pod_id"]]):
            removed_at[seen["pod_id"]] = at
    removed = set(removed_at)
    data = {"removed_outside": True, "source": who}
    _members_gone(rental, removed_at)
    if pods and pods <= removed:
        message = f"Removed outside the dashboard by {who}: every member was removed."
        moved = rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=RentalStatus.TERMINATING,
            message=message,
            data=data,
        )
        if moved:
            rental_transition(
                rental_id=rental.pk,
                from_status=RentalStatus.TERMINATING,
                to_status=RentalStatus.TERMINATED,
                message=f"The cluster was removed outside the dashboard (by {who}); nothing is left to remove.",
                data=data,
                **_shown(message),
            )
        return
    if rental.status != RentalStatus.DEGRADED:
        message = (
            f"A member (pod {event.pod_id}) was removed outside the dashboard by {who}. "
            "The other members keep running and billing."
        )
        rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=RentalStatus.DEGRADED,
            message=message,
            kind=RentalEvent.Kind.MEMBER,
            data=data,
            **_shown(message),
        )


def _shown(message: str) -> dict[str, Any]:
    """Return the error fields that make the customer's page say why, beside its state."""
    return {"error_code": "removed_outside", "error_message": message, "error_hint": "", "error_request_id": ""}


def _members_gone(rental: Rental, removed_at: dict[str, Any]) -> None:
    """Mark the removed members gone from when Lium removed them: the page stops offering their SSH lines, and
    their cost stops then (`billing/pod_cost.py`), not when this dashboard heard of it."""
    gone = rental.members.filter(pod_id__in=removed_at, gone_at__isnull=True)
    for member in gone:
        member.status, member.gone_at = "GONE", removed_at[member.pod_id]
        member.save(update_fields=["status", "gone_at", "updated_at"])
    if gone:
        rental_touch(rental_id=rental.pk)


def _schedule_outside(rental: Rental, event: AccountEvent) -> None:
    when = timestamp(event.detail.get("removal_scheduled_at"))
    ours = rental.removal_scheduled_at
    if (when is None and ours is None) or (when and ours and abs((when - ours).total_seconds()) < 1):
        return  # ours (the dashboard pushed it, to the millisecond), or already adopted
    rental_touch(rental_id=rental.pk, removal_scheduled_at=when)
    rental_id = rental.pk
    transaction.on_commit(lambda: removal_push_enqueue(rental_id))  # every member keeps the same time
    said = f"now at {when:%Y-%m-%d %H:%M} UTC" if when else "cancelled"
    RentalEvent.objects.create(
        rental=rental,
        kind=RentalEvent.Kind.MEMBER,
        message=f"The removal schedule was changed outside the dashboard by {event_source(event)}: {said}.",
        data={"action": "adopt_removal", "removal_scheduled_at": when.isoformat() if when else None},
    )
