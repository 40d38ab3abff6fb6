"""Staff writes on rentals: retry now, reconcile, confirm, terminate, cancel, and the support-view record.

Every action needs a reason and ends up on the rental's timeline as one `staff_action` event (who, what,
why), written by `rentals.audit` as the admin's actions are. State changes go through `rentals.transitions`
and the rentals services, never around them.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from rentals import idempotency_promise, upstream
from rentals import services as rental_services
from rentals.audit import staff_action_event, staff_action_record
from rentals.enqueue import rental_send_enqueue
from rentals.models import Rental
from rentals.outcomes import MAX_RETRY_WINDOW, retry_deadline
from rentals.selectors import rental_attention_reason
from rentals.states import RentalStatus
from rentals.tracking import reconcile
from rentals.transitions import rental_touch, rental_transition

# A replay of these answers can only repeat them: the upstream keeps 409 outcome-unknown forever, and a
# 422 key-reused means our stored bytes no longer match what was first sent (a defect to investigate).
NO_REPLAY_ERRORS = frozenset({"idempotency_outcome_unknown", "idempotency_key_reused"})


def _require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError("Say why: the reason is recorded on the rental's timeline.")
    return reason


def replay_deadline(rental: Rental) -> datetime | None:
    """Return until when a manual replay may be asked for: inside the upstream's 24 h key window minus 1 h,
    and not after the engine's own retry deadline (its claim refuses to send a rental past it)."""
    if rental.first_sent_at is None:
        return None
    if rental.status == RentalStatus.UNKNOWN:
        # A replay sets retry_until, so the engine accepts it up to the hard limit.
        return rental.first_sent_at + MAX_RETRY_WINDOW
    engine_deadline = retry_deadline(rental) or rental.first_sent_at + MAX_RETRY_WINDOW
    return min(rental.first_sent_at + MAX_RETRY_WINDOW, engine_deadline)


def retry_refusal(rental: Rental, now: datetime | None = None) -> str:
    """Return why `retry now` is not possible for this rental, or "" if it is."""
    now = now or timezone.now()
    if rental.status not in (RentalStatus.RETRYING, RentalStatus.UNKNOWN):
        return "Only a retrying or outcome-unknown rental can be retried."
    deadline = replay_deadline(rental)
    if deadline is not None and now >= deadline:
        return (
            f"Too late to send again: the window closed at {deadline:%Y-%m-%d %H:%M} UTC. Past the upstream's 24 h "
            "key window the same key would rent a second cluster; reconcile instead."
        )
    if rental.status == RentalStatus.UNKNOWN and rental.error_code in NO_REPLAY_ERRORS:
        return f"A replay would only repeat Lium's answer ({rental.error_code}); reconcile instead."
    # The engine's claim refuses such a re-send anyway; say so here rather than offer a button that cannot work.
    possibly_sent = rental.possibly_sent or rental.status == RentalStatus.UNKNOWN
    if possibly_sent and not idempotency_promise.idempotency_promise_for_display(rental.credential):
        return f"An earlier attempt may have reached Lium, and {idempotency_promise.NO_PROMISE_MESSAGE}."
    return ""


def ops_retry_now(*, rental: Rental, actor: User, reason: str) -> str:
    """Send the stored request again now, with the same key and bytes. Return what was done."""
    reason = _require_reason(reason)
    now = timezone.now()
    refusal = retry_refusal(rental, now)
    if refusal:
        raise ValidationError(refusal)
    with transaction.atomic():
        if rental.status == RentalStatus.RETRYING:
            moved = _retry_due_now(rental=rental, actor=actor, reason=reason, now=now)
        else:
            moved = _replay_unknown(rental=rental, actor=actor, reason=reason, now=now)
        if not moved:
            raise ValidationError("The rental changed meanwhile; look at its state again.")
        # Read under the lock the update above holds: the send is for the next attempt, the very turn the
        # retry's own delayed message waits for, so whichever comes second finds it taken and does nothing.
        turn = Rental.objects.values_list("attempt_count", flat=True).get(pk=rental.pk) + 1
        transaction.on_commit(lambda: rental_send_enqueue(rental.pk, turn=turn))
    return "Sending the stored order again with the same key."


def _retry_due_now(*, rental: Rental, actor: User, reason: str, now: datetime) -> bool:
    """Make a retrying rental due now, recorded as a staff action; return whether it was still retrying."""
    moved = rental_touch(rental_id=rental.pk, in_status=RentalStatus.RETRYING, next_attempt_at=now)
    if moved:
        staff_action_record(
            rental_id=rental.pk,
            actor=actor,
            action="retry_now",
            reason=reason,
            message=f"Retry now (same key, same bytes). {reason}",
        )
    return moved


def _replay_unknown(*, rental: Rental, actor: User, reason: str, now: datetime) -> bool:
    """Move an outcome-unknown rental back to retrying, due now; return whether it was still unknown."""
    return rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.UNKNOWN,
        to_status=RentalStatus.RETRYING,
        **staff_action_event(
            actor=actor,
            action="retry_now",
            reason=reason,
            message=f"Replay the stored order now (same key, same bytes). {reason}",
        ),
        next_attempt_at=now,
        # An outcome-unknown order may have reached Lium: the claim re-checks the idempotency promise.
        possibly_sent=True,
        # Let the engine keep retrying up to the hard limit (first send + 23 h) for this replay.
        retry_until=rental.first_sent_at + MAX_RETRY_WINDOW if rental.first_sent_at else None,
    )


# What an operator's look at a rented rental whose members never appeared found.
LOOK_MESSAGES = {
    "found": "Found the cluster matching this order; its id is stored and its members are being fetched.",
    "no_match": "No cluster matching this order exists upstream.",
    "ambiguous": "Several clusters match this order; ask Lium which one is ours.",
    "held": "The only clusters matching this order belong to other rentals; the rental's timeline lists them.",
    "contested": "The matching cluster matches another unsettled rental too; the rental's timeline lists both.",
    "listing_failed": "Could not list Lium's pods; try again in a moment.",
}


def ops_reconcile(*, rental: Rental, actor: User, reason: str) -> str:
    """Look upstream for the cluster of an outcome-unknown rental, or of a rented one whose members never
    appeared; record the finding and return it in a sentence.

    For an unknown rental the operator then confirms what was found; a rented rental's cluster, when
    exactly one matches, is stored at once (so it can be tracked and terminated).
    """
    reason = _require_reason(reason)
    now = timezone.now()
    if rental.status == RentalStatus.UNKNOWN:
        try:
            finding = reconcile.rental_reconcile(rental=rental, actor=actor)
        except (upstream.UpstreamError, ValueError) as exc:
            # Unreachable, refused or unreadable: nothing is concluded, and the operator is told so (never a 500).
            raise ValidationError(
                f"Could not list Lium's pods ({exc}); nothing was concluded. Try again shortly."
            ) from exc
        rental_touch(rental_id=rental.pk, last_reconcile_at=now)
        message = finding.message
    elif rental.status == RentalStatus.RENTED and rental_attention_reason(rental=rental, now=now):
        result = reconcile.rental_look(rental=rental, actor=actor)
        message = LOOK_MESSAGES.get(result.outcome, "Nothing changed: the rental moved on meanwhile.")
    else:
        raise ValidationError(
            "Only an outcome-unknown rental, or a rented one whose members have not appeared, needs reconciling."
        )
    staff_action_record(
        rental_id=rental.pk, actor=actor, action="reconcile", reason=reason, message=f"Reconcile: {message} {reason}"
    )
    return message


def ops_confirm_reconciliation(*, rental: Rental, actor: User, cluster_id: str | None, reason: str) -> bool:
    """Settle an outcome-unknown rental: rented as `cluster_id`, or not rented when it is None."""
    reason = _require_reason(reason)
    # The settling transition is itself the staff action's timeline entry.
    return reconcile.rental_confirm_reconciliation(
        rental=rental, actor=actor, cluster_id=cluster_id or None, reason=reason
    )


def ops_terminate(*, rental: Rental, actor: User, reason: str) -> bool:
    """Remove the rental's cluster."""
    reason = _require_reason(reason)
    if not rental.cluster_id and rental_attention_reason(rental=rental, now=timezone.now()):
        raise ValidationError(
            "The cluster's id is not known: its members have not appeared in Lium's pod list. Reconcile to look "
            "for the cluster; once it is found its id is stored and it can be terminated."
        )
    # An operator's terminate is recorded as a staff action by the transition itself (`rentals.audit`).
    return rental_services.rental_terminate(rental=rental, actor=actor, reason=reason)


def ops_cancel(*, rental: Rental, actor: User, reason: str) -> bool:
    """Cancel a rental that has not been sent yet."""
    reason = _require_reason(reason)
    return rental_services.rental_cancel(rental=rental, actor=actor, reason=reason)
