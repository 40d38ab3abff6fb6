"""One live retry chain: a `rental_send` message for a turn (attempt number) that was taken does nothing.

The engine's follow-up and an operator's Retry now name the turn they are for; a message without one (the
submit, the sweeper, the capacity dispatcher, or one enqueued before turns existed) may take any due turn.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from rentals import engine, tasks
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream, error, rented, send_args

pytestmark = pytest.mark.django_db


@pytest.fixture
def due_retry(make_rental, clock: Clock, enqueued: Enqueued) -> Rental:
    """A rental whose first attempt was inconclusive and whose second is due now."""
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        possibly_sent=True,
        first_sent_at=clock.now - timedelta(seconds=30),
        next_attempt_at=clock.now,
    )
    enqueued.calls.clear()
    return rental


def test_a_message_for_a_turn_already_taken_sends_nothing_and_says_it_was_stale(
    due_retry: Rental, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(due_retry.pk, 1) == engine.STALE_TURN
    assert fake_upstream.rent_requests == [] and enqueued.calls == []
    after = Rental.objects.get(pk=due_retry.pk)
    assert (after.status, after.attempt_count, after.version) == (RentalStatus.RETRYING, 1, due_retry.version)


def test_the_message_for_the_next_turn_sends_and_schedules_the_turn_after_it(
    promising_backend,
    due_retry: Rental,
    fake_upstream: FakeUpstream,
    enqueued: Enqueued,
    django_capture_on_commit_callbacks,
) -> None:
    fake_upstream.script = [error(503, "unavailable")]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(due_retry.pk, 2) == RentalStatus.RETRYING
    assert len(fake_upstream.rent_requests) == 1
    [(args, countdown)] = enqueued.of("rental_send")
    assert args == (due_retry.pk, 3) and countdown


def test_a_message_without_a_turn_still_sends_as_before(
    promising_backend, due_retry: Rental, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks
) -> None:
    fake_upstream.script = [rented()]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(due_retry.pk) == RentalStatus.RENTED
    assert len(fake_upstream.rent_requests) == 1


def test_a_late_chain_message_after_the_sweepers_copy_took_its_turn_starts_no_second_chain(
    promising_backend,
    due_retry: Rental,
    fake_upstream: FakeUpstream,
    enqueued: Enqueued,
    clock: Clock,
    settings,
    django_capture_on_commit_callbacks,
) -> None:
    # The chain's own message for turn 2 waits in a slow queue; the sweeper sees the retry overdue.
    late_chain_message = (due_retry.pk, 2)
    clock.advance(seconds=2 * settings.SWEEP_INTERVAL_SECONDS + 6)
    tasks.rentals_sweep()
    [(sweepers_copy, _)] = enqueued.of("rental_send")
    enqueued.calls.clear()
    fake_upstream.script = [error(503, "unavailable"), error(503, "unavailable")]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(*send_args(sweepers_copy)) == RentalStatus.RETRYING
    [(follow_up, countdown)] = enqueued.of("rental_send")
    assert countdown is not None
    # The late message arrives once the next turn is due, before the follow-up is delivered.
    clock.advance(seconds=countdown)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(*send_args(late_chain_message)) == engine.STALE_TURN
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(*send_args(follow_up)) == RentalStatus.RETRYING
    assert len(fake_upstream.rent_requests) == 2, "one send per turn, each by the chain's own message"
    assert [args for args, _ in enqueued.of("rental_send")] == [follow_up, (due_retry.pk, 4)]
