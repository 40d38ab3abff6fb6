"""Decide what one rent answer proves: the state the rental moves to, the words on its timeline, what to store.

Decisions only, over the classified answer (`rentals.upstream.rent_classify`) and what the rental already
knew; `rentals.engine` applies the verdict with one transition. Also the retry rules the decision uses
(backoff, the retry window inside the upstream's 24 h key window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings

from common.backoff import backoff_seconds
from rentals.states import RentalStatus
from rentals.upstream import Classification, RentResult

if TYPE_CHECKING:
    from rentals.models import Rental

# The upstream keeps a key for 24 h; after that a re-send is a new rent. Never retry past 23 h, whatever
# the setting says.
MAX_RETRY_WINDOW = timedelta(hours=23)


def retry_delay(*, attempt_number: int, retry_after: float | None) -> float:
    """Return seconds to wait: exponential backoff with jitter, never less than Retry-After."""
    delay = backoff_seconds(
        failures=attempt_number, base=settings.RENT_BACKOFF_BASE_SECONDS, cap=settings.RENT_BACKOFF_CAP_SECONDS
    )
    return max(delay, retry_after or 0.0)


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


@dataclass(frozen=True)
class Verdict:
    """Where one answer takes a `sending` rental, and what is stored on it besides the released lease."""

    status: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    retry_in: float | None = None  # seconds until the next send (only when retrying)


def possibly_sent_after(result: RentResult, *, before: bool) -> bool:
    """Return whether any attempt, this one included, may have reached Lium."""
    # A 429 means the server answered instead of running the request, so it did not rent either.
    return before or (result.classification != Classification.NEVER_SENT and result.http_status != 429)


def _error_fields(result: RentResult) -> dict[str, Any]:
    return {
        "error_code": result.error_code,
        "error_message": result.message[:2000],
        "error_hint": result.hint[:2000],
        "error_request_id": result.request_id,
    }


def verdict(
    result: RentResult,
    *,
    number: int,
    sent_before: bool,
    deadline: datetime | None,
    now: datetime,
    promises_idempotency: Callable[[], bool],
) -> Verdict:
    """Return what attempt `number`'s answer proves.

    `sent_before`: whether an earlier attempt may have reached Lium. `promises_idempotency` is asked only
    when a re-send could rent twice (it may cost a `GET /version`).
    """
    if result.classification == Classification.CONFIRMED:
        return Verdict(
            RentalStatus.RENTED,
            "Lium confirmed the order" + (" (a replay of the first answer)." if result.replayed else "."),
            {
                "pod_ids": result.pod_ids,
                "cluster_id": result.cluster_id,
                "replayed": result.replayed,
                # The order is rented: earlier errors stay on the timeline, not on the rental.
                "error_code": "",
                "error_message": "",
                "error_hint": "",
                "error_request_id": result.request_id,
            },
        )
    if result.classification == Classification.REFUSED:
        return _refused(result, sent_before=sent_before)
    if result.classification == Classification.OUTCOME_UNKNOWN:
        return Verdict(
            RentalStatus.UNKNOWN,
            f"The API cannot say whether the order rented: {result.message}",
            _error_fields(result),
        )
    return _inconclusive(
        result, number=number, sent_before=sent_before, deadline=deadline, now=now, promised=promises_idempotency
    )


def _refused(result: RentResult, *, sent_before: bool) -> Verdict:
    # Only the stored answer to the first request (a replay) proves it rented nothing. A fresh refusal of a
    # repeat may come from a check before the key lookup (401/402/403), from a pending first request (a
    # plain 400), or from nodes that the first request itself took (409 not free).
    if result.replayed or not sent_before:
        return Verdict(
            RentalStatus.REFUSED,
            f"Lium refused the order: {result.message}",
            {"replayed": result.replayed, **_error_fields(result)},
        )
    return Verdict(
        RentalStatus.UNKNOWN,
        f"A repeat was refused ({result.http_status}: {result.message}) without the stored answer of the first "
        "request, so it says nothing about that one, which may have rented.",
        _error_fields(result),
    )


def _inconclusive(
    result: RentResult,
    *,
    number: int,
    sent_before: bool,
    deadline: datetime | None,
    now: datetime,
    promised: Callable[[], bool],
) -> Verdict:
    """Inconclusive or never sent: retry with the same key and bytes, while the window and budget allow."""
    errors = _error_fields(result)
    # A re-send is only safe when the backend honours Idempotency-Key on rents (a 429 or a connection that
    # was never made did not run the request, so those may always be repeated).
    answered_without_running = result.classification == Classification.NEVER_SENT or result.http_status == 429
    if not answered_without_running and not promised():
        return Verdict(
            RentalStatus.UNKNOWN,
            "The answer was lost and this Lium backend does not list rent_idempotency, so the order is never "
            "re-sent (a repeat could rent twice); the cluster may exist.",
            errors,
        )
    delay = retry_delay(attempt_number=number, retry_after=result.retry_after)
    next_at = now + timedelta(seconds=delay)
    out_of_attempts = number >= settings.RENT_MAX_ATTEMPTS
    if out_of_attempts or (deadline is not None and next_at > deadline):
        why = "no attempts left" if out_of_attempts else "the retry window is over"
        if possibly_sent_after(result, before=sent_before):
            message = f"Stopped retrying ({why}); an attempt may have reached Lium, so the cluster may exist."
            return Verdict(RentalStatus.UNKNOWN, message, errors)
        return Verdict(RentalStatus.FAILED, f"Nothing was rented: the API could not be reached ({why}).", errors)
    return Verdict(
        RentalStatus.RETRYING,
        f"{result.message or 'No clear answer.'} Retrying in {delay:.0f} s with the same key.",
        {**errors, "next_attempt_at": next_at},
        retry_in=delay,
    )
