"""The rent engine: claim a rental, send its stored bytes with its key, record and settle the attempt.

Never rent twice: every attempt sends the same `Idempotency-Key` and byte-identical body, both stored at
submit. Never lose a rental: the row is the truth; a lost message or a killed worker only delays it
(the sweeper re-enqueues what is due or stuck). Never claim what is not known: each attempt's
classification (see `rentals.upstream.classify_rent`) decides the next state, and when retries end
after a possibly-sent attempt the rental becomes `unknown`, never `failed`. Never re-send blind: the claim,
which every send goes through (a retry, an operator's replay, a lease takeover), sends an order that may
already have reached Lium only to a backend that promises idempotency; otherwise it settles `unknown`.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import UpstreamCredential
from common.backoff import backoff_seconds
from common.logcontext import bind
from rentals import capacity, upstream
from rentals.enqueue import enqueue_pods_sync, enqueue_rental_send
from rentals.models import Rental, RentalEvent, RentAttempt
from rentals.states import RentalStatus as S
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream import Classification, RentResult

logger = logging.getLogger(__name__)

# The upstream keeps a key for 24 h; after that a re-send is a new rent. Never retry past 23 h, whatever
# the setting says.
MAX_RETRY_WINDOW = timedelta(hours=23)


@dataclass(frozen=True)
class Claim:
    """A rental this worker holds in `sending` until `lease_until`."""

    rental: Rental
    token: uuid.UUID
    number: int


def retry_delay(*, attempt_number: int, retry_after: float | None) -> float:
    """Return seconds to wait: exponential backoff with jitter, never less than Retry-After."""
    delay = backoff_seconds(
        failures=attempt_number, base=settings.RENT_BACKOFF_BASE_SECONDS, cap=settings.RENT_BACKOFF_CAP_SECONDS
    )
    return max(delay, retry_after or 0.0)


FEATURES_CACHE_SECONDS = 600


def upstream_promises_idempotency(credential: UpstreamCredential) -> bool:
    """Return whether the credential's backend lists `rent_idempotency` in `GET /version`.

    A yes is remembered for ten minutes; a no, or a failed `/version`, is asked again next time (as the
    official client does), and meanwhile counts as no.
    """
    cache_key = f"rent-idempotency:{credential.pk}"
    if cache.get(cache_key):
        return True
    try:
        promised = "rent_idempotency" in upstream.client_for(credential).version()
    except (upstream.UpstreamError, ValueError):
        return False
    if promised:
        cache.set(cache_key, True, FEATURES_CACHE_SECONDS)
    return promised


DISPLAY_NO_PROMISE_SECONDS = 60


def idempotency_promise_for_display(credential: UpstreamCredential) -> bool:
    """Return `upstream_promises_idempotency` for a page: a no is remembered for a minute, so a page that
    asks while the backend says no (or is down) does not wait on `GET /version` at every view."""
    cache_key = f"rent-idempotency-shown:{credential.pk}"
    remembered = cache.get(cache_key)
    if remembered is not None:
        return bool(remembered)
    promised = upstream_promises_idempotency(credential)
    cache.set(cache_key, promised, FEATURES_CACHE_SECONDS if promised else DISPLAY_NO_PROMISE_SECONDS)
    return promised


def retry_window() -> timedelta:
    """Return how long after the first send automatic retries may go on (RENT_RETRY_WINDOW, at most 23 h)."""
    return min(settings.RENT_RETRY_WINDOW, MAX_RETRY_WINDOW)


def retry_deadline(rental: Rental) -> datetime | None:
    """Return when automatic retrying stops (inside the upstream's 24 h key window)."""
    if rental.first_sent_at is None:
        return None
    hard_limit = rental.first_sent_at + MAX_RETRY_WINDOW
    if rental.retry_until is not None:
        return min(rental.retry_until, hard_limit)
    return rental.first_sent_at + retry_window()


NO_PROMISE_MESSAGE = (
    "this Lium backend does not promise idempotency (GET /version lists no rent_idempotency); a re-send "
    "could rent twice — reconcile instead, or ask Lium"
)


def _claimable() -> Q:
    """Return the rentals that are due for an attempt now: queued, retry due, or an expired `sending` lease."""
    now = timezone.now()
    return (
        Q(status=S.QUEUED)
        | Q(status=S.RETRYING, next_attempt_at__lte=now)
        | Q(status=S.SENDING, lease_until__lt=now, attempt_count__lt=settings.RENT_MAX_ATTEMPTS)
    ) & (
        # A late message (workers down for hours) must not re-send once the key's window is over: past
        # 24 h upstream the same key and bytes rent again. `rental_settle_expired` settles those instead.
        Q(first_sent_at__isnull=True)
        | Q(first_sent_at__gte=now - retry_window())
        | Q(retry_until__gt=now, first_sent_at__gt=now - MAX_RETRY_WINDOW)
    )


def may_have_reached_lium(rental: Rental) -> bool:
    """Return whether an earlier attempt may have reached Lium: a possibly-sent answer, or a worker that died."""
    return rental.possibly_sent or rental.status == S.SENDING


def rental_claim(*, rental_id: int) -> Claim | None:
    """Take a rental that is due (queued, retry due, or an expired `sending` lease) into `sending`.

    Every send goes through here, so this is where a re-send is refused: an order an earlier attempt may
    have delivered is sent again only to a backend that promises idempotency; otherwise it settles `unknown`.
    """
    outcome = _claim(rental_id)
    return outcome if isinstance(outcome, Claim) else None


def _claim(rental_id: int) -> Claim | str | None:
    """Claim the rental; return the claim, the state it was settled in instead of a re-send, or None."""
    # With the credential the attempt sends with: one query, and no reload after the update below.
    rental = Rental.objects.select_related("credential").filter(_claimable(), pk=rental_id).first()
    if rental is None:
        return None
    # Asked before any transaction opens: `GET /version` is an HTTP call (a yes is cached).
    if may_have_reached_lium(rental) and not upstream_promises_idempotency(rental.credential):
        return _settle_unsafe_resend(rental)
    now = timezone.now()
    token = uuid.uuid4()
    previous_status = rental.status
    lease_expired = previous_status == S.SENDING
    number = rental.attempt_count + 1
    claimed: dict[str, Any] = {
        "lease_token": token,
        "lease_until": now + timedelta(seconds=settings.RENT_LEASE_SECONDS),
        "attempt_count": number,
        "first_sent_at": rental.first_sent_at or now,
        "last_sent_at": now,
        "next_attempt_at": None,
    }
    if lease_expired:
        claimed["possibly_sent"] = True
    with transaction.atomic():
        if not capacity.admit(rental, now=now):
            return None  # no free rent slot: it waits, and `capacity.dispatch` sends it when one frees
        # On the version read above: every write a page shows bumps it, so if this matches, the row is
        # exactly the one read plus `claimed`, and the object can be brought up to date without a reload.
        moved = rental_transition(
            rental_id=rental_id,
            from_status=previous_status,
            to_status=S.SENDING,
            expect_version=rental.version,
            message=f"Attempt {number}: sending the stored order.",
            data={"attempt": number, "lease_taken_over": lease_expired},
            **claimed,
        )
        if not moved:
            return None
        if lease_expired:
            _record_lost_attempt(rental, now)
    for name, value in claimed.items():
        setattr(rental, name, value)
    rental.status = S.SENDING
    rental.version += 1
    rental.updated_at = now
    return Claim(rental=rental, token=token, number=number)


def _settle_unsafe_resend(rental: Rental) -> str | None:
    """Settle `unknown` a due rental that may not be sent again: its backend does not promise idempotency."""
    now = timezone.now()
    lease_expired = rental.status == S.SENDING
    earlier = "the worker stopped during the last attempt, which" if lease_expired else "an earlier attempt"
    with transaction.atomic():
        moved = rental_transition(
            rental_id=rental.pk,
            from_status=rental.status,
            to_status=S.UNKNOWN,
            expect_version=rental.version,
            message=f"Not sent again: {earlier} may have reached Lium, and {NO_PROMISE_MESSAGE}.",
            data={"reason": "no_idempotency_promise"},
            lease_token=None,
            lease_until=None,
            next_attempt_at=None,
            possibly_sent=True,
        )
        if moved and lease_expired:
            _record_lost_attempt(rental, now)
    return S.UNKNOWN if moved else None


def _record_lost_attempt(rental: Rental, now: datetime) -> None:
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


def rental_attempt(*, rental_id: int) -> str | None:
    """Claim the rental, send it once, and settle the attempt. Return the new status, or None if not due."""
    claim = _claim(rental_id)
    if isinstance(claim, str):
        return claim  # settled instead of re-sent
    if claim is None:
        # Not due, held by another worker, or past its window (then settle it now rather than at the next sweep).
        return rental_settle_expired(rental_id=rental_id)
    rental = claim.rental
    with bind(rental_id=rental.public_id, idempotency_key=rental.idempotency_key, customer=rental.customer_ref or "-"):
        logger.info("Rent attempt %s: sending %s bytes.", claim.number, len(rental.request_body))
        capacity.release_db_connection()  # hold no database connection while waiting on Lium
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
        # (the lease check below still stops this stale worker from settling the rental).
        logger.warning("Attempt %s of rental %s answered after its lease was taken over.", claim.number, rental.pk)
        RentAttempt.objects.filter(rental_id=rental.pk, number=claim.number).update(**attempt)
        rental_touch(rental_id=rental.pk)  # the page shows attempts: a new version, so polls fetch it
    # A 429 means the server answered instead of running the request, so it did not rent either.
    possibly_sent = rental.possibly_sent or (
        result.classification != Classification.NEVER_SENT and result.http_status != 429
    )
    error_fields: dict[str, Any] = {
        "error_code": result.error_code,
        "error_message": result.message[:2000],
        "error_hint": result.hint[:2000],
        "error_request_id": result.request_id,
    }
    common: dict[str, Any] = {
        "rental_id": rental.pk,
        "from_status": S.SENDING,
        "expect_lease": claim.token,
        "data": {
            "attempt": claim.number,
            "http_status": result.http_status,
            "classification": result.classification,
            "replayed": result.replayed,
            "request_id": result.request_id,
            "error_code": result.error_code,
        },
    }
    release: dict[str, Any] = {"lease_token": None, "lease_until": None, "possibly_sent": possibly_sent}

    if result.classification == Classification.CONFIRMED:
        moved = rental_transition(
            to_status=S.RENTED,
            message="Lium confirmed the order" + (" (a replay of the first answer)." if result.replayed else "."),
            pod_ids=result.pod_ids,
            cluster_id=result.cluster_id,
            replayed=result.replayed,
            error_code="",
            error_message="",
            error_hint="",
            error_request_id=result.request_id,
            **release,
            **common,
        )
        if moved:
            transaction.on_commit(lambda: enqueue_pods_sync(rental.credential_id))
        return S.RENTED if moved else None

    if result.classification == Classification.REFUSED:
        # Only the stored answer to the first request (a replay) proves it rented nothing. A fresh refusal of
        # a repeat may come from a check before the key lookup (401/402/403), from a pending first request
        # (a plain 400), or from nodes that the first request itself took (409 not free).
        proves_nothing_rented = result.replayed or not rental.possibly_sent
        if proves_nothing_rented:
            moved = rental_transition(
                to_status=S.REFUSED,
                message=f"Lium refused the order: {result.message}",
                replayed=result.replayed,
                **error_fields,
                **release,
                **common,
            )
            return S.REFUSED if moved else None
        moved = rental_transition(
            to_status=S.UNKNOWN,
            message=(
                f"A repeat was refused ({result.http_status}: {result.message}) without the stored answer of "
                "the first request, so it says nothing about that one, which may have rented."
            ),
            **error_fields,
            **release,
            **common,
        )
        return S.UNKNOWN if moved else None

    if result.classification == Classification.OUTCOME_UNKNOWN:
        if result.key_reused:
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
        moved = rental_transition(
            to_status=S.UNKNOWN,
            message=f"The API cannot say whether the order rented: {result.message}",
            **error_fields,
            **release,
            **common,
        )
        return S.UNKNOWN if moved else None

    # Inconclusive or never sent: retry with the same key and bytes, while the window and budget allow.
    # A re-send is only safe when the backend honours Idempotency-Key on rents (a 429 or a connection that
    # was never made did not run the request, so those may always be repeated).
    answered_without_running = result.classification == Classification.NEVER_SENT or result.http_status == 429
    if not answered_without_running and not upstream_promises_idempotency(rental.credential):
        moved = rental_transition(
            to_status=S.UNKNOWN,
            message=(
                "The answer was lost and this Lium backend does not list rent_idempotency, so the order is "
                "never re-sent (a repeat could rent twice); the cluster may exist."
            ),
            **error_fields,
            **release,
            **common,
        )
        return S.UNKNOWN if moved else None
    now = timezone.now()
    delay = retry_delay(attempt_number=claim.number, retry_after=result.retry_after)
    next_at = now + timedelta(seconds=delay)
    deadline = retry_deadline(rental)
    out_of_attempts = claim.number >= settings.RENT_MAX_ATTEMPTS
    out_of_window = deadline is not None and next_at > deadline
    if out_of_attempts or out_of_window:
        why = "no attempts left" if out_of_attempts else "the retry window is over"
        if possibly_sent:
            moved = rental_transition(
                to_status=S.UNKNOWN,
                message=f"Stopped retrying ({why}); an attempt may have reached Lium, so the cluster may exist.",
                **error_fields,
                **release,
                **common,
            )
            return S.UNKNOWN if moved else None
        moved = rental_transition(
            to_status=S.FAILED,
            message=f"Nothing was rented: the API could not be reached ({why}).",
            **error_fields,
            **release,
            **common,
        )
        return S.FAILED if moved else None
    moved = rental_transition(
        to_status=S.RETRYING,
        message=f"{result.message or 'No clear answer.'} Retrying in {delay:.0f} s with the same key.",
        next_attempt_at=next_at,
        **error_fields,
        **release,
        **common,
    )
    if moved:
        transaction.on_commit(lambda: enqueue_rental_send(rental.pk, countdown=delay))
    return S.RETRYING if moved else None


def rental_settle_expired(*, rental_id: int) -> str | None:
    """Settle a rental that may not be sent again: its window closed while it waited, or a worker died
    during its last allowed attempt (an expired `sending` lease past the window or out of attempts)."""
    now = timezone.now()
    rental = Rental.objects.filter(
        Q(status=S.RETRYING) | Q(status=S.SENDING, lease_until__lt=now), pk=rental_id
    ).first()
    if rental is None:
        return None
    deadline = retry_deadline(rental)
    window_over = deadline is not None and now > deadline
    if rental.status == S.SENDING:
        if not window_over and rental.attempt_count < settings.RENT_MAX_ATTEMPTS:
            return None  # still claimable: the next claim records the lost attempt and re-sends
        why = "the retry window is over" if window_over else "no attempts left"
        with transaction.atomic():
            moved = rental_transition(
                rental_id=rental_id,
                from_status=S.SENDING,
                to_status=S.UNKNOWN,
                expect_lease=rental.lease_token,
                message=f"The worker stopped during the last attempt ({why}); it may have reached Lium, "
                "so the cluster may exist.",
                lease_token=None,
                lease_until=None,
                possibly_sent=True,
                next_attempt_at=None,
            )
            if moved:
                _record_lost_attempt(rental, now)
        return S.UNKNOWN if moved else None
    if not window_over:
        return None
    to_status = S.UNKNOWN if rental.possibly_sent else S.FAILED
    message = (
        "The retry window closed; an attempt may have reached Lium, so the cluster may exist."
        if rental.possibly_sent
        else "Nothing was rented: the API could not be reached before the retry window closed."
    )
    moved = rental_transition(
        rental_id=rental_id, from_status=S.RETRYING, to_status=to_status, message=message, next_attempt_at=None
    )
    return to_status if moved else None
