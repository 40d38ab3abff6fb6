"""The rent engine: claim a rental, send its stored bytes with its key, record and settle the attempt.

Never rent twice: every attempt sends the same `Idempotency-Key` and byte-identical body, both stored at
submit. Never lose a rental: the row is the truth; a lost message or a killed worker only delays it
(the sweeper re-enqueues what is due or stuck). Never claim what is not known: each attempt's
classification (see `rentals.upstream.rent_classify`) decides the next state, and when retries end
after a possibly-sent attempt the rental becomes `unknown`, never `failed`. Never re-send blind: the claim,
which every send goes through (a retry, an operator's replay, a lease takeover), sends an order that may
already have reached Lium only to a backend that promises idempotency; otherwise it settles `unknown`.
One live retry chain: a message scheduled for a turn (an attempt number) claims only that turn, so once any
message took it, an earlier schedule's message (e.g. the one an operator's Retry now overrode) does nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from common.db import db_connection_release
from common.logcontext import bind
from rentals import capacity, idempotency_promise, lium_switch, outcomes, upstream
from rentals.enqueue import pods_sync_enqueue, rental_send_enqueue
from rentals.models import Rental, RentalEvent, RentAttempt
from rentals.outcomes import MAX_RETRY_WINDOW, retry_deadline, retry_window
from rentals.states import RentalStatus
from rentals.tracking import holding
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream import Classification, RentResult

logger = logging.getLogger(__name__)

# What a `rental_send` message for a turn already taken returns: it did nothing.
STALE_TURN = "stale_turn"


@dataclass(frozen=True)
class Claim:
    """A rental this worker holds in `sending` until `lease_until`."""

    rental: Rental
    token: uuid.UUID
    number: int


@dataclass(frozen=True)
class ClaimOutcome:
    """What an attempt to claim a rental came to: `claim` when this worker holds it; otherwise `stale_turn` (another
    message took this turn), `settled` (the status it was settled in instead of a re-send), or neither: not due,
    held by another worker, or waiting for a rent slot."""

    claim: Claim | None = None
    stale_turn: bool = False
    settled: str | None = None


def _claimable() -> Q:
    """Return the rentals that are due for an attempt now: queued, retry due, or an expired `sending` lease."""
    now = timezone.now()
    return (
        Q(status=RentalStatus.QUEUED)
        | Q(status=RentalStatus.RETRYING, next_attempt_at__lte=now)
        | Q(status=RentalStatus.SENDING, lease_until__lt=now, attempt_count__lt=settings.RENT_MAX_ATTEMPTS)
    ) & (
        # A late message (workers down for hours) must not re-send once the key's window is over: past
        # 24 h upstream the same key and bytes rent again. `rental_settle_expired` settles those instead.
        Q(first_sent_at__isnull=True)
        | Q(first_sent_at__gte=now - retry_window())
        | Q(retry_until__gt=now, first_sent_at__gt=now - MAX_RETRY_WINDOW)
    )


def may_have_reached_lium(rental: Rental) -> bool:
    """Return whether an earlier attempt may have reached Lium: a possibly-sent answer, or a worker that died."""
    return rental.possibly_sent or rental.status == RentalStatus.SENDING


# The same rule as a query (reconciliation's rivals): `sending` covers an attempt on the wire as well.
MAY_HAVE_REACHED_LIUM = Q(possibly_sent=True) | Q(status=RentalStatus.SENDING)


def rental_claim(*, rental_id: int, turn: int | None = None) -> ClaimOutcome:
    """Take a rental that is due (queued, retry due, or an expired `sending` lease) into `sending`, or say why not.

    With `turn`, only if that is the attempt it would make (`turn - 1` attempts made so far).
    Every send goes through here, so this is where a re-send is refused: an order an earlier attempt may
    have delivered is sent again only to a backend that promises idempotency; otherwise it settles `unknown`.
    """
    # With the credential the attempt sends with: one query, and no reload after the update below.
    rental = Rental.objects.select_related("credential").filter(_claimable(), pk=rental_id).first()
    if rental is None:
        return ClaimOutcome()
    if turn is not None and rental.attempt_count != turn - 1:
        # Another message took this turn (the claim below is conditional on the version, so this read holds).
        logger.info("Rental %s: the message for attempt %s is stale (%s made).", rental_id, turn, rental.attempt_count)
        return ClaimOutcome(stale_turn=True)
    if (hold := lium_switch.rental_hold(rental)) is not None:  # Lium switched cluster renting off: not sent
        return ClaimOutcome(settled=hold or None)
    # Asked before any transaction opens: `GET /version` is an HTTP call (a yes is cached).
    if may_have_reached_lium(rental) and not idempotency_promise.upstream_promises_idempotency(rental.credential):
        return ClaimOutcome(settled=RentalStatus.UNKNOWN) if _settle_unsafe_resend(rental) else ClaimOutcome()
    now = timezone.now()
    token = uuid.uuid4()
    previous_status = rental.status
    lease_expired = previous_status == RentalStatus.SENDING
    number = rental.attempt_count + 1
    claimed: dict[str, Any] = {
        "lease_token": token,
        "lease_until": now + timedelta(seconds=settings.RENT_LEASE_SECONDS),
        "attempt_count": number,
        "first_sent_at": rental.first_sent_at or now,
        "last_sent_at": now,
        "next_attempt_at": None,
        **lium_switch.claim_clears(rental),
    }
    if lease_expired:
        claimed["possibly_sent"] = True
    with transaction.atomic():
        if not capacity.admit(rental, now=now):
            return ClaimOutcome()  # no free rent slot: it waits, and `capacity.dispatch` sends it when one frees
        # On the version read above: every write a page shows bumps it, so if this matches, the row is
        # exactly the one read plus `claimed`, and the object can be brought up to date without a reload.
        moved = rental_transition(
            rental_id=rental_id,
            from_status=previous_status,
            to_status=RentalStatus.SENDING,
            expect_version=rental.version,
            message=f"Attempt {number}: sending the stored order.",
            data={"attempt": number, "lease_taken_over": lease_expired},
            **claimed,
        )
        if not moved:
            return ClaimOutcome()
        if lease_expired:
            _lost_attempt_record(rental, now)
    for name, value in claimed.items():
        setattr(rental, name, value)
    rental.status = RentalStatus.SENDING
    rental.version += 1
    rental.updated_at = now
    return ClaimOutcome(claim=Claim(rental=rental, token=token, number=number))


def _settle_unsafe_resend(rental: Rental) -> bool:
    """Settle `unknown` a due rental that may not be sent again: its backend does not promise idempotency.
    Return whether it moved (another worker may have moved it first)."""
    now = timezone.now()
    lease_expired = rental.status == RentalStatus.SENDING
    earlier = "the worker stopped during the last attempt, which" if lease_expired else "an earlier attempt"
    with transaction.atomic():
        moved = rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=RentalStatus.UNKNOWN,
            expect_version=rental.version,
            message=f"Not sent again: {earlier} may have reached Lium, and {idempotency_promise.NO_PROMISE_MESSAGE}.",
            data={"reason": "no_idempotency_promise"},
            lease_token=None,
            lease_until=None,
            next_attempt_at=None,
            possibly_sent=True,
        )
        if moved and lease_expired:
            _lost_attempt_record(rental, now)
    return moved


def _lost_attempt_record(rental: Rental, now: datetime) -> None:
    """Record the attempt of a worker that died while sending: its answer, if any, was lost."""
    started = rental.last_sent_at or now
    RentAttempt.objects.get_or_create(
        rental_id=rental.pk,
        number=rental.attempt_count,
        defaults={
            "started_at": started,
            "duration_ms": int((now - started).total_seconds() * 1000),
            "classification": Classification.INCONCLUSIVE,
            "message": "The worker stopped during this attempt; its answer (if any) was lost.",
        },
    )


def rental_attempt(*, rental_id: int, turn: int | None = None) -> str | None:
    """Claim the rental (for `turn`, if given), send it once, and settle the attempt.

    Return the new status, `STALE_TURN` if the turn was taken, or None if not due.
    """
    outcome = rental_claim(rental_id=rental_id, turn=turn)
    if outcome.stale_turn:
        return STALE_TURN
    if outcome.settled is not None:
        return outcome.settled  # settled instead of re-sent
    claim = outcome.claim
    if claim is None:
        # Not due, held by another worker, or past its window (then settle it now rather than at the next sweep).
        return rental_settle_expired(rental_id=rental_id)
    rental = claim.rental
    with bind(rental_id=rental.public_id, idempotency_key=rental.idempotency_key, customer=rental.customer_ref or "-"):
        logger.info("Rent attempt %s: sending %s bytes.", claim.number, len(rental.request_body))
        db_connection_release()  # hold no database connection while waiting on Lium
        started_at = timezone.now()
        started = time.monotonic()
        try:
            client = upstream.client_for(rental.credential)
        except ValueError as exc:
            # The secret cannot be decrypted here (rotated keys?): nothing left this process.
            result = RentResult(Classification.NEVER_SENT, message=str(exc))
        else:
            # No transaction is open here: the HTTP call may take up to the client's timeout.
            result = client.rent_cluster(
                body=bytes(rental.request_body),
                idempotency_key=str(rental.idempotency_key),
                customer_ref=rental.customer_ref,
            )
        duration_ms = int((time.monotonic() - started) * 1000)
        with bind(request_id=result.request_id or None):
            status = rental_record_attempt(claim=claim, result=result, started_at=started_at, duration_ms=duration_ms)
            logger.info(
                "Rent attempt %s: HTTP %s, %s%s, %s ms; rental is now %s.",
                claim.number,
                result.http_status or "-",
                result.classification,
                " (replayed)" if result.replayed else "",
                duration_ms,
                status or "unchanged (lease lost)",
            )
        capacity.dispatch()  # this attempt's slot is free: the next fair waiting rental takes it
        return status


def rental_record_attempt(*, claim: Claim, result: RentResult, started_at: datetime, duration_ms: int) -> str | None:
    """Store the attempt and move the rental to what the answer proves. Return the new status."""
    rental = claim.rental
    _store_attempt(claim, result, started_at=started_at, duration_ms=duration_ms)
    if result.classification == Classification.OUTCOME_UNKNOWN and result.key_reused:
        _key_reuse_record(rental, result)
    decided = outcomes.verdict(
        result,
        number=claim.number,
        sent_before=rental.possibly_sent,
        deadline=retry_deadline(rental),
        now=timezone.now(),
        promises_idempotency=lambda: idempotency_promise.upstream_promises_idempotency(rental.credential),
    )
    settle: dict[str, Any] = {
        "rental_id": rental.pk,
        "from_status": RentalStatus.SENDING,
        "to_status": decided.status,
        "expect_lease": claim.token,
        "message": decided.message,
        "data": {
            "attempt": claim.number,
            "http_status": result.http_status,
            "classification": result.classification,
            "replayed": result.replayed,
            "request_id": result.request_id,
            "error_code": result.error_code,
        },
        "lease_token": None,
        "lease_until": None,
        "possibly_sent": outcomes.possibly_sent_after(result, before=rental.possibly_sent),
        **decided.fields,
    }
    # A cluster (and each pod) belongs to one rental: one another rental holds is not taken, whatever the answer.
    cluster_id, pod_ids = settle.get("cluster_id") or "", settle.get("pod_ids") or []
    taken = holding.holder_of(cluster_id=cluster_id, pod_ids=pod_ids, other_than=rental.pk)
    refused = taken is not None
    without = {**settle, "cluster_id": "", "pod_ids": []}  # its pods are the holder's too
    try:
        moved = rental_transition(**(without if refused else settle))
    except IntegrityError:  # another rental took it between the check and this write
        taken, refused = holding.holder_of(cluster_id=cluster_id, pod_ids=pod_ids, other_than=rental.pk), True
        moved = rental_transition(**without)
    if moved and refused:  # always on the timeline, even when the race's holder was not found again
        _cluster_held_record(rental, cluster_id=cluster_id, pod_ids=pod_ids, holder=taken)
    if not moved:
        return None
    if decided.status == RentalStatus.RENTED:
        transaction.on_commit(lambda: pods_sync_enqueue(rental.credential_id))
    elif decided.retry_in is not None:
        delay = decided.retry_in
        # For the next turn only: if another message takes that turn first, this one does nothing.
        transaction.on_commit(lambda: rental_send_enqueue(rental.pk, countdown=delay, turn=claim.number + 1))
    return decided.status


def _store_attempt(claim: Claim, result: RentResult, *, started_at: datetime, duration_ms: int) -> None:
    """Store the attempt's answer (also over a row another worker recorded as lost)."""
    rental = claim.rental
    attempt = {
        "started_at": started_at,
        "duration_ms": duration_ms,
        "http_status": result.http_status,
        "classification": result.classification,
        "error_code": result.error_code,
        "message": result.message[:2000],
        "replayed": result.replayed,
        "request_id": result.request_id,
    }
    try:
        with transaction.atomic():
            RentAttempt.objects.create(rental_id=rental.pk, number=claim.number, **attempt)
    except IntegrityError:
        # Our lease expired and another worker recorded this attempt as lost: keep the answer that did come
        # (the lease check in the transition still stops this stale worker from settling the rental).
        logger.warning("Attempt %s of rental %s answered after its lease was taken over.", claim.number, rental.pk)
        RentAttempt.objects.filter(rental_id=rental.pk, number=claim.number).update(**attempt)
        rental_touch(rental_id=rental.pk)  # the page shows attempts: a new version, so polls fetch it


def _cluster_held_record(rental: Rental, *, cluster_id: str, pod_ids: list[str], holder: Rental | None) -> None:
    """Record as a defect that Lium confirmed our order with a cluster another rental holds: it stays with that
    rental (one holder only), and an operator asks Lium which order created it."""
    what = cluster_id or f"pods {', '.join(pod_ids)}"
    logger.error("Defect: rental %s was confirmed as %s, which another rental holds.", rental.pk, what)
    RentalEvent.objects.create(
        rental_id=rental.pk,
        kind=RentalEvent.Kind.DEFECT,
        message=f"Lium confirmed this order as {'cluster ' if cluster_id else ''}{what}, but "
        + holding.held_message(cluster_id=cluster_id, holder=holder, pod_ids=pod_ids)
        + " Ask Lium which order created it; this rental tracks no member until then.",
        data={"cluster_id": cluster_id, "pod_ids": pod_ids, "held_by": str(holder.public_id) if holder else None},
    )


def _key_reuse_record(rental: Rental, result: RentResult) -> None:
    """Record as a defect that Lium saw our key with other bytes: the stored body must never change."""
    logger.error(
        "Defect: the upstream says idempotency key %s was reused with different bytes (rental %s).",
        rental.idempotency_key,
        rental.pk,
    )
    RentalEvent.objects.create(
        rental_id=rental.pk,
        kind=RentalEvent.Kind.DEFECT,
        message="The API says this key was used with a different body: our stored bytes changed.",
        data={"request_id": result.request_id},
    )


def rental_settle_expired(*, rental_id: int) -> str | None:
    """Settle a rental that may not be sent again: its window closed while it waited, or a worker died
    during its last allowed attempt (an expired `sending` lease past the window or out of attempts)."""
    now = timezone.now()
    rental = Rental.objects.filter(
        Q(status=RentalStatus.RETRYING) | Q(status=RentalStatus.SENDING, lease_until__lt=now), pk=rental_id
    ).first()
    if rental is None:
        return None
    deadline = retry_deadline(rental)
    window_over = deadline is not None and now > deadline
    if rental.status == RentalStatus.SENDING:
        if not window_over and rental.attempt_count < settings.RENT_MAX_ATTEMPTS:
            return None  # still claimable: the next claim records the lost attempt and re-sends
        why = "the retry window is over" if window_over else "no attempts left"
        with transaction.atomic():
            moved = rental_transition(
                rental_id=rental_id,
                from_status=RentalStatus.SENDING,
                to_status=RentalStatus.UNKNOWN,
                expect_lease=rental.lease_token,
                message=f"The worker stopped during the last attempt ({why}); it may have reached Lium, "
                "so the cluster may exist.",
                lease_token=None,
                lease_until=None,
                possibly_sent=True,
                next_attempt_at=None,
            )
            if moved:
                _lost_attempt_record(rental, now)
        return RentalStatus.UNKNOWN if moved else None
    if not window_over:
        return None
    to_status = RentalStatus.UNKNOWN if rental.possibly_sent else RentalStatus.FAILED
    message = (
        "The retry window closed; an attempt may have reached Lium, so the cluster may exist."
        if rental.possibly_sent
        else "Nothing was rented: the API could not be reached before the retry window closed."
    )
    moved = rental_transition(
        rental_id=rental_id,
        from_status=RentalStatus.RETRYING,
        to_status=to_status,
        message=message,
        next_attempt_at=None,
    )
    return to_status if moved else None
