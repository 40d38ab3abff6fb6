"""What a rental shows of the upstream's last error: kept while retrying, cleared once the order is confirmed.

Support reads the code, message, hint and request id on the rental (and quotes the request id to Lium); a
customer whose cluster was confirmed must not keep seeing an old error.
"""

from __future__ import annotations

import httpx
import pytest

from rentals import tasks
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, FakeUpstream, rented

pytestmark = pytest.mark.django_db


def attempt(rental: Rental, capture) -> None:  # type: ignore[no-untyped-def]
    with capture(execute=False):
        tasks.rental_send(rental.pk)
    rental.refresh_from_db()


def busy(status: int = 503) -> httpx.Response:
    """An upstream error with every field filled in."""
    body = {
        "success": False,
        "error": {
            "code": "upstream_busy",
            "message": "The scheduler is busy",
            "hint": "Try again in a minute",
            "request_id": "req-busy-1",
        },
    }
    return httpx.Response(status, json=body)


def test_a_retrying_rental_shows_the_code_message_hint_and_request_id_of_the_last_answer(
    promising_backend: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    promising_backend.script = [busy()]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.RETRYING
    assert (rental.error_code, rental.error_message, rental.error_hint, rental.error_request_id) == (
        "upstream_busy",
        "The scheduler is busy",
        "Try again in a minute",
        "req-busy-1",
    )


def test_a_confirmation_clears_the_earlier_error_and_keeps_its_own_request_id(
    promising_backend: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    promising_backend.script = [busy(), rented()]
    attempt(rental, django_capture_on_commit_callbacks)
    clock.now = rental.next_attempt_at

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.RENTED
    assert (rental.error_code, rental.error_message, rental.error_hint) == ("", "", "")
    assert rental.error_request_id == "req-ok", "support quotes the confirming answer's request id"


def test_a_refusal_stores_the_hint_and_request_id_for_support(
    fake_upstream: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    body = {
        "error": {
            "code": "insufficient_balance",
            "message": "Not enough credit",
            "hint": "Top up your account",
            "request_id": "req-402",
        }
    }
    fake_upstream.script = [httpx.Response(402, json=body)]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.REFUSED
    assert (rental.error_code, rental.error_hint, rental.error_request_id) == (
        "insufficient_balance",
        "Top up your account",
        "req-402",
    )


def test_an_unknown_outcome_keeps_the_answers_error_for_support(
    fake_upstream: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [busy()]  # no promise: a lost answer is not re-sent

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.UNKNOWN
    assert (rental.error_code, rental.error_hint, rental.error_request_id) == (
        "upstream_busy",
        "Try again in a minute",
        "req-busy-1",
    )


def test_a_long_message_is_cut_to_2000_characters_not_refused(
    promising_backend: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    body = {"error": {"code": "x", "message": "m" * 2500, "hint": "h" * 2500, "request_id": "r"}}
    promising_backend.script = [httpx.Response(503, json=body)]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.error_message == "m" * 2000 and rental.error_hint == "h" * 2000
