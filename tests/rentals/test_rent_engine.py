"""The rent engine: claim, send the stored bytes with the stored key, record the attempt, settle the rental."""

from __future__ import annotations

import logging
from datetime import timedelta

import httpx
import pytest

from common import backoff
from rentals import engine, outcomes, tasks
from rentals.models import Rental, RentalEvent, RentAttempt
from rentals.services import rental_cancel
from rentals.states import RentalStatus
from rentals.upstream import Classification as C
from rentals.upstream import RentResult
from tests.rentals.fakes import REPLAYED, Clock, Enqueued, FakeUpstream, error, rented

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the top of the jitter range so delays are exact: base * 2 ** (n - 1)."""
    monkeypatch.setattr(backoff.random, "uniform", lambda low, high: high)


def attempt(rental: Rental, capture) -> str | None:  # type: ignore[no-untyped-def]
    """Run one `rental_send` as a worker would, and run what it enqueues on commit."""
    with capture(execute=True):
        status = tasks.rental_send(rental.pk)
    rental.refresh_from_db()
    return status


def attempts_of(rental: Rental) -> list[tuple[int, str]]:
    return list(RentAttempt.objects.filter(rental=rental).values_list("number", "classification"))


def run_until_settled(rental: Rental, clock: Clock, capture, limit: int = 20) -> None:  # type: ignore[no-untyped-def]
    """Attempt, and while the rental is retrying move the clock to its next attempt and go again."""
    attempt(rental, capture)
    for _ in range(limit):
        if rental.status != RentalStatus.RETRYING:
            return
        assert rental.next_attempt_at is not None, "a retrying rental knows when it tries next"
        clock.now = rental.next_attempt_at
        attempt(rental, capture)
    raise AssertionError("the rental never settled")


# --- claim ---------------------------------------------------------------------------------------------------


def test_claiming_a_queued_rental_takes_it_into_sending_under_a_lease(make_rental, clock: Clock) -> None:
    rental = make_rental()
    claim = engine.rental_claim(rental_id=rental.pk).claim
    assert claim is not None and claim.number == 1
    rental.refresh_from_db()
    assert rental.status == RentalStatus.SENDING and rental.attempt_count == 1
    assert rental.lease_token == claim.token and rental.lease_until == clock.now + timedelta(seconds=60)
    assert rental.first_sent_at == clock.now == rental.last_sent_at
    assert engine.rental_claim(rental_id=rental.pk).claim is None, "a second worker finds it held"


def test_a_retrying_rental_is_not_claimed_before_it_is_due(
    promising_backend, make_rental, clock: Clock, fake_upstream
) -> None:
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=clock.now,
        next_attempt_at=clock.now + timedelta(seconds=30),
        possibly_sent=True,
    )
    assert engine.rental_attempt(rental_id=rental.pk) is None
    assert fake_upstream.requests == []
    clock.advance(seconds=30)
    assert engine.rental_claim(rental_id=rental.pk).claim is not None


def test_a_cancelled_rental_is_never_sent(make_rental, alice, fake_upstream) -> None:
    rental = make_rental()
    assert rental_cancel(rental=rental, actor=alice)
    assert engine.rental_attempt(rental_id=rental.pk) is None
    rental.refresh_from_db()
    assert rental.status == RentalStatus.CANCELLED and fake_upstream.requests == []


# --- one attempt, each classification --------------------------------------------------------------------------


def test_a_confirmed_attempt_rents_and_starts_pod_tracking(
    make_rental, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [rented(pod_ids=["p1", "p2"], cluster_id="cl-7")]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.RENTED

    assert rental.status == RentalStatus.RENTED and rental.pod_ids == ["p1", "p2"] and rental.cluster_id == "cl-7"
    assert rental.replayed is False and rental.possibly_sent is True and rental.lease_token is None
    assert attempts_of(rental) == [(1, C.CONFIRMED)]
    assert RentAttempt.objects.get(rental=rental).request_id == "req-ok"
    assert enqueued.of("credential_pods_sync") == [((rental.credential_id,), None)]
    sent = fake_upstream.rent_requests[0]
    assert sent.content == bytes(rental.request_body)
    assert sent.headers["Idempotency-Key"] == str(rental.idempotency_key)
    assert sent.headers["X-Customer-Ref"] == "acme"


def test_a_replayed_confirmation_is_recorded_as_a_replay(
    make_rental, fake_upstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [rented(headers=REPLAYED)]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.RENTED
    assert rental.replayed is True
    assert RentAttempt.objects.get(rental=rental).replayed is True
    assert "replay" in rental.events.filter(to_status=RentalStatus.RENTED).get().message


@pytest.mark.parametrize(
    "response",
    [
        error(400, "bad_request", "Executor busy"),
        error(402, "API_KEY_BUDGET_EXCEEDED", "Executor busy"),
        httpx.Response(200, json={"success": False, "message": "Executor busy"}),
    ],
    ids=["400", "402", "200-success-false"],
)
def test_a_definite_refusal_is_final_and_shows_the_upstream_reason(
    make_rental, fake_upstream, enqueued: Enqueued, django_capture_on_commit_callbacks, response
) -> None:
    rental = make_rental()
    fake_upstream.script = [response]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.REFUSED
    assert rental.status == RentalStatus.REFUSED and rental.error_message == "Executor busy"
    assert attempts_of(rental) == [(1, C.REFUSED)]
    assert enqueued.of("rental_send") == [], "a refusal is not retried"


@pytest.mark.parametrize(
    "step",
    [
        error(503, "unavailable"),
        error(429, "rate_limited"),
        error(409, "idempotency_in_progress"),
        httpx.ReadTimeout("read timed out"),
    ],
    ids=["503", "429", "409-in-progress", "read-timeout"],
)
def test_an_inconclusive_attempt_is_retried_later_with_the_same_key(
    promising_backend,
    make_rental,
    fake_upstream,
    enqueued: Enqueued,
    clock: Clock,
    no_jitter,
    django_capture_on_commit_callbacks,
    step,
) -> None:
    rental = make_rental()
    fake_upstream.script = [step]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.RETRYING
    assert rental.status == RentalStatus.RETRYING and rental.lease_token is None
    # A 429 is the server declining to run the request, so only the others may have rented.
    assert rental.possibly_sent is (getattr(step, "status_code", None) != 429)
    assert rental.next_attempt_at == clock.now + timedelta(seconds=2)
    assert enqueued.of("rental_send") == [((rental.pk, 2), 2.0)], "the follow-up is for attempt 2"
    assert attempts_of(rental) == [(1, C.INCONCLUSIVE)]


def test_a_never_sent_attempt_is_retried_without_marking_the_order_possibly_sent(
    make_rental, fake_upstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ConnectError("connection refused")]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.RETRYING
    assert rental.possibly_sent is False
    assert attempts_of(rental) == [(1, C.NEVER_SENT)]


def test_409_outcome_unknown_stops_at_unknown_without_retrying(
    make_rental, fake_upstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(409, "idempotency_outcome_unknown", "Outcome unknown")]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN
    assert rental.error_code == "idempotency_outcome_unknown"
    assert attempts_of(rental) == [(1, C.OUTCOME_UNKNOWN)]
    assert enqueued.of("rental_send") == []
    assert not rental.events.filter(kind=RentalEvent.Kind.DEFECT).exists()


def test_422_key_reused_stops_at_unknown_and_is_logged_as_a_defect(
    make_rental, fake_upstream, django_capture_on_commit_callbacks, caplog: pytest.LogCaptureFixture
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(422, "idempotency_key_reused", "Different body", request_id="req-422")]
    with caplog.at_level(logging.ERROR, logger="rentals.engine"):
        assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN
    defect = rental.events.get(kind=RentalEvent.Kind.DEFECT)
    assert defect.data == {"request_id": "req-422"}
    assert any("Defect" in r.getMessage() and str(rental.idempotency_key) in r.getMessage() for r in caplog.records)


def test_a_secret_that_cannot_be_decrypted_counts_as_never_sent(
    make_rental, fake_upstream, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()

    def broken(credential, **kwargs):  # type: ignore[no-untyped-def]
        raise ValueError("The secret cannot be decrypted with the current keys.")

    monkeypatch.setattr(engine.upstream, "client_for", broken)
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.RETRYING
    assert rental.possibly_sent is False and attempts_of(rental) == [(1, C.NEVER_SENT)]


# --- fresh refusals after a possibly-sent attempt --------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 402, 403])
def test_a_fresh_401_402_403_after_a_possibly_sent_attempt_is_unknown_not_refused(
    promising_backend, make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks, status: int
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ReadTimeout("lost"), error(status, "", "Key revoked")]
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    # The check ran before the key was looked up: the first attempt may still have rented.
    assert rental.status == RentalStatus.UNKNOWN
    assert attempts_of(rental) == [(1, C.INCONCLUSIVE), (2, C.REFUSED)]


def test_a_replayed_403_after_a_possibly_sent_attempt_proves_nothing_was_rented(
    promising_backend, make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ReadTimeout("lost"), error(403, "insufficient_balance", headers=REPLAYED)]
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.REFUSED and rental.replayed is True


def test_a_fresh_403_when_nothing_was_possibly_sent_is_a_refusal(
    make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ConnectError("refused"), error(403, "insufficient_balance")]
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.REFUSED


@pytest.mark.parametrize("refusal", [error(400, "bad_request"), error(409, "executor_not_available")])
def test_a_fresh_refusal_after_a_possibly_sent_attempt_proves_nothing(
    make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks, refusal
) -> None:
    """upstream-api.md §12: only a replayed refusal is the first request's answer; the first may have rented
    (and taken the very nodes the repeat now finds busy)."""
    rental = make_rental()
    fake_upstream.script = [error(502, "bad_gateway"), refusal]
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.UNKNOWN


# --- retries ---------------------------------------------------------------------------------------------------


def test_every_retry_sends_the_same_key_and_byte_identical_body_until_confirmed(
    promising_backend, make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [
        error(503),
        httpx.ReadTimeout("lost"),
        error(429),
        error(409, "idempotency_in_progress"),
        rented(headers=REPLAYED),
    ]
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.RENTED and rental.replayed is True and rental.attempt_count == 5
    sent = fake_upstream.rent_requests
    assert len(sent) == 5
    assert {r.content for r in sent} == {bytes(rental.request_body)}
    assert {r.headers["Idempotency-Key"] for r in sent} == {str(rental.idempotency_key)}
    assert [n for n, _ in attempts_of(rental)] == [1, 2, 3, 4, 5]


def test_retry_delays_grow_exponentially_up_to_the_cap(engine_settings, no_jitter) -> None:
    delays = [outcomes.retry_delay(attempt_number=n, retry_after=None) for n in range(1, 8)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


def test_retry_delays_are_jittered_between_half_and_the_full_backoff(engine_settings) -> None:
    delays = {outcomes.retry_delay(attempt_number=3, retry_after=None) for _ in range(50)}
    assert all(4.0 <= delay <= 8.0 for delay in delays)
    assert len(delays) > 1, "many rentals failing together do not retry in lockstep"


def test_retry_after_is_honoured_when_longer_than_the_backoff(
    make_rental, fake_upstream, enqueued: Enqueued, clock: Clock, no_jitter, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(429, "rate_limited", headers={"Retry-After": "45"})]
    attempt(rental, django_capture_on_commit_callbacks)
    assert rental.next_attempt_at == clock.now + timedelta(seconds=45)
    assert enqueued.of("rental_send") == [((rental.pk, 2), 45.0)]
    assert engine.rental_attempt(rental_id=rental.pk) is None, "not due before Retry-After"
    assert len(fake_upstream.rent_requests) == 1


def test_attempts_are_bounded_and_end_unknown_when_any_may_have_been_sent(
    promising_backend, engine_settings, make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ConnectError("refused")] * 4 + [error(503)]
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.UNKNOWN and rental.possibly_sent is True
    assert len(fake_upstream.rent_requests) == 5 == rental.attempt_count
    assert "no attempts left" in rental.events.filter(to_status=RentalStatus.UNKNOWN).get().message


def test_attempts_are_bounded_and_end_failed_when_none_was_ever_sent(
    engine_settings, make_rental, fake_upstream, enqueued: Enqueued, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ConnectError("refused"), httpx.ConnectTimeout("timeout")] * 3
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.FAILED and rental.possibly_sent is False
    assert len(fake_upstream.rent_requests) == 5
    assert attempts_of(rental) == [(n, C.NEVER_SENT) for n in range(1, 6)]
    assert len(enqueued.of("rental_send")) == 4


def test_a_possibly_sent_attempt_early_on_still_makes_the_end_unknown(
    make_rental, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ReadTimeout("lost")] + [httpx.ConnectError("refused")] * 4
    run_until_settled(rental, clock, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.UNKNOWN


# --- the retry window --------------------------------------------------------------------------------------------


def test_retrying_stops_within_the_window_when_the_next_attempt_would_fall_outside_it(
    make_rental, fake_upstream, enqueued: Enqueued, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    first = clock.now
    fake_upstream.script = [httpx.ConnectError("refused"), httpx.ConnectError("refused")]
    attempt(rental, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.RETRYING
    clock.now = first + timedelta(hours=2) - timedelta(milliseconds=500)  # the window is 2 h here
    attempt(rental, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.FAILED and "retry window is over" in rental.events.last().message
    assert len(enqueued.of("rental_send")) == 1


def test_a_retry_after_beyond_the_window_ends_the_retries_now(
    make_rental, fake_upstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(503, headers={"Retry-After": str(3 * 3600)})]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN


def test_the_23_hour_cut_off_with_a_moved_clock(
    promising_backend, make_rental, engine_settings, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    engine_settings.RENT_RETRY_WINDOW = timedelta(hours=23)
    engine_settings.RENT_MAX_ATTEMPTS = 100
    rental = make_rental()
    first = clock.now
    fake_upstream.script = [error(503), error(503)]
    attempt(rental, django_capture_on_commit_callbacks)
    assert rental.status == RentalStatus.RETRYING and rental.first_sent_at == first

    # Nearly 23 h later (the workers were down) the retry is still allowed, with the same key and bytes...
    clock.now = first + timedelta(hours=22, minutes=59, seconds=59)
    attempt(rental, django_capture_on_commit_callbacks)
    # ...but the next one would fall past 23 h, so the engine stops and a human decides.
    assert rental.status == RentalStatus.UNKNOWN and rental.next_attempt_at is None
    assert len(fake_upstream.rent_requests) == 2
    assert {r.headers["Idempotency-Key"] for r in fake_upstream.rent_requests} == {str(rental.idempotency_key)}


def test_the_window_never_exceeds_23_hours_whatever_the_setting(make_rental, engine_settings, clock: Clock) -> None:
    engine_settings.RENT_RETRY_WINDOW = timedelta(hours=30)
    rental = make_rental(first_sent_at=clock.now)
    assert outcomes.retry_deadline(rental) == clock.now + timedelta(hours=23)


def test_a_retry_delivered_after_the_23_hour_cut_off_is_not_sent_and_settles(
    make_rental, engine_settings, fake_upstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    engine_settings.RENT_RETRY_WINDOW = timedelta(hours=23)
    first = clock.now
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=first,
        last_sent_at=first,
        next_attempt_at=first + timedelta(seconds=2),
        possibly_sent=True,
    )
    # The broker held the message for a day: past 24 h the same key would rent a second cluster.
    clock.now = first + timedelta(hours=23, seconds=1)
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.UNKNOWN
    assert fake_upstream.rent_requests == []
    assert rental.attempt_count == 1


def test_settle_expired_fails_a_never_sent_rental_whose_window_closed(make_rental, clock: Clock) -> None:
    first = clock.now
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=first,
        next_attempt_at=first + timedelta(minutes=1),
        possibly_sent=False,
    )
    assert engine.rental_settle_expired(rental_id=rental.pk) is None, "the window is still open"
    clock.now = first + timedelta(hours=2, seconds=1)
    assert engine.rental_settle_expired(rental_id=rental.pk) == RentalStatus.FAILED
    rental.refresh_from_db()
    assert rental.status == RentalStatus.FAILED and rental.next_attempt_at is None


# --- leases, stale and dead workers ------------------------------------------------------------------------------


def test_claiming_an_expired_sending_lease_records_the_lost_attempt_and_marks_possibly_sent(
    promising_backend, make_rental, clock: Clock
) -> None:
    rental = make_rental()
    dead = engine.rental_claim(rental_id=rental.pk).claim
    assert dead is not None
    assert engine.rental_claim(rental_id=rental.pk).claim is None, "the lease still holds"
    clock.advance(seconds=61)

    claim = engine.rental_claim(rental_id=rental.pk).claim
    assert claim is not None and claim.number == 2 and claim.token != dead.token
    rental.refresh_from_db()
    assert rental.status == RentalStatus.SENDING and rental.possibly_sent is True and rental.attempt_count == 2
    lost = RentAttempt.objects.get(rental=rental, number=1)
    assert lost.classification == C.INCONCLUSIVE and "stopped" in lost.message
    assert lost.duration_ms == 61_000


def test_a_stale_worker_whose_lease_was_taken_over_cannot_settle(
    promising_backend, make_rental, clock: Clock, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    stale = engine.rental_claim(rental_id=rental.pk).claim
    clock.advance(seconds=61)
    current = engine.rental_claim(rental_id=rental.pk).claim
    assert stale is not None and current is not None

    # The stale worker's answer finally arrives: it is kept on the record but moves nothing.
    version = Rental.objects.get(pk=rental.pk).version
    confirmed = RentResult(C.CONFIRMED, http_status=200, request_id="req-stale", pod_ids=["p1", "p2"])
    with django_capture_on_commit_callbacks(execute=True):
        outcome = engine.rental_record_attempt(claim=stale, result=confirmed, started_at=clock.now, duration_ms=5)
    assert outcome is None
    rental.refresh_from_db()
    assert rental.status == RentalStatus.SENDING and rental.lease_token == current.token and rental.pod_ids == []
    assert rental.version == version + 1, "the attempts the page shows changed: open pages must fetch them"
    first = RentAttempt.objects.get(rental=rental, number=1)
    assert (first.classification, first.request_id) == (C.CONFIRMED, "req-stale")
    assert enqueued.of("credential_pods_sync") == []

    # The current holder settles normally.
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            engine.rental_record_attempt(
                claim=current,
                result=RentResult(C.CONFIRMED, http_status=200, replayed=True, pod_ids=["p1", "p2"]),
                started_at=clock.now,
                duration_ms=5,
            )
            == RentalStatus.RENTED
        )
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RENTED and rental.replayed is True


def test_a_worker_that_dies_during_the_last_allowed_attempt_is_settled_not_resent(
    promising_backend, make_rental, engine_settings, clock: Clock, fake_upstream
) -> None:
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=4,
        first_sent_at=clock.now,
        possibly_sent=True,
        next_attempt_at=clock.now,
    )
    claim = engine.rental_claim(rental_id=rental.pk).claim
    assert claim is not None and claim.number == 5
    clock.advance(seconds=61)
    assert engine.rental_claim(rental_id=rental.pk).claim is None, "no sixth attempt"
    assert engine.rental_settle_expired(rental_id=rental.pk) == RentalStatus.UNKNOWN
    rental.refresh_from_db()
    assert rental.status == RentalStatus.UNKNOWN and rental.lease_token is None
    assert attempts_of(rental) == [(5, C.INCONCLUSIVE)]
    assert fake_upstream.rent_requests == [], "the order was not sent a sixth time"


def test_an_expired_lease_inside_the_window_is_left_for_a_new_claim(make_rental, clock: Clock) -> None:
    rental = make_rental()
    engine.rental_claim(rental_id=rental.pk)
    clock.advance(seconds=61)
    assert engine.rental_settle_expired(rental_id=rental.pk) is None
    rental.refresh_from_db()
    assert rental.status == RentalStatus.SENDING


def test_a_duplicate_delivery_after_the_rental_settled_sends_nothing(
    make_rental, fake_upstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [rented()]
    assert attempt(rental, django_capture_on_commit_callbacks) == RentalStatus.RENTED
    assert attempt(rental, django_capture_on_commit_callbacks) is None
    assert len(fake_upstream.rent_requests) == 1 and rental.attempt_count == 1
