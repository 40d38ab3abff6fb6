"""Removing a cluster while `DELETE /clusters/{id}` fails: one live retry chain per rental, with backoff.

Before, every sweep started one more chain for the same rental, so the DELETE rate and the timeline's
events grew with every sweep for as long as the outage lasted.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from rentals import tasks
from rentals.models import Rental, RentalEvent
from rentals.removal import deletion as removal
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream, error

pytestmark = pytest.mark.django_db


class Broker:
    """Delivers recorded enqueues of `rental_delete_cluster` when their countdown has passed, as Celery would."""

    def __init__(self, enqueued: Enqueued, clock: Clock) -> None:
        self.enqueued = enqueued
        self.clock = clock
        self.waiting: list[tuple[datetime, tuple[Any, ...]]] = []  # the task's arguments, as sent to Celery

    def deliver_due(self) -> int:
        for args, countdown in self.enqueued.of("rental_delete_cluster"):
            self.waiting.append((self.clock.now + timedelta(seconds=countdown or 0), args))
        self.enqueued.calls.clear()
        due = [item for item in self.waiting if item[0] <= self.clock.now]
        self.waiting = [item for item in self.waiting if item[0] > self.clock.now]
        for _, sent in due:
            tasks.rental_delete_cluster(*sent)
        return len(due)


def deletes(fake: FakeUpstream) -> list[httpx.Request]:
    return [request for request in fake.requests if request.method == "DELETE"]


def test_sweeps_during_a_delete_outage_keep_one_retry_chain_per_rental(
    make_rental, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock, settings
) -> None:
    settings.SWEEP_INTERVAL_SECONDS = 5
    settings.CLUSTER_DELETE_BACKOFF_BASE_SECONDS = 15
    settings.CLUSTER_DELETE_BACKOFF_CAP_SECONDS = 120
    fake_upstream.script = [error(503, "unavailable", "Service unavailable") for _ in range(500)]
    rental = make_rental(status=RentalStatus.TERMINATING, cluster_id="cl-1")
    enqueued.calls.clear()
    broker = Broker(enqueued, clock)
    tasks.cluster_delete_enqueue(rental.pk)  # what the terminate enqueues

    elapsed = 30 * 60
    for _ in range(elapsed // 5):  # a sweep every 5 s for half an hour
        broker.deliver_due()
        clock.advance(seconds=5)
        tasks.rentals_sweep()
    broker.deliver_due()

    calls = len(deletes(fake_upstream))
    assert calls <= math.ceil(elapsed / 15), f"{calls} DELETEs in {elapsed} s"
    # The backoff grows to its cap: about one DELETE per 2 minutes once it is there, not one per sweep.
    assert calls <= math.ceil(elapsed / (120 * 0.5)) + 5
    failures = RentalEvent.objects.filter(rental=rental, message__startswith="Remove failed").count()
    assert failures == calls, "one timeline event per failed DELETE, none per sweep"
    assert len(broker.waiting) <= 1, "at most one retry message is on its way"
    rental.refresh_from_db()
    assert rental.status == RentalStatus.TERMINATING and rental.delete_attempts == calls


def test_the_retry_chain_ends_when_lium_removes_the_cluster(
    make_rental, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock, settings
) -> None:
    settings.CLUSTER_DELETE_BACKOFF_BASE_SECONDS = 15
    rental = make_rental(status=RentalStatus.TERMINATING, cluster_id="cl-1")
    enqueued.calls.clear()
    fake_upstream.script = [error(503, "unavailable"), error(404, "not_found", "No pods in cluster")]
    assert tasks.rental_delete_cluster(rental.pk) == "retry"
    [((rental_id,), countdown)] = enqueued.of("rental_delete_cluster")
    assert rental_id == rental.pk
    assert countdown is not None and 7.5 <= countdown <= 15
    assert tasks.rental_delete_cluster(rental.pk) == "not-due", "a copy delivered early sends nothing"
    clock.advance(seconds=countdown)
    assert tasks.rental_delete_cluster(rental.pk) == "gone"
    rental.refresh_from_db()
    assert rental.status == RentalStatus.TERMINATED and len(deletes(fake_upstream)) == 2


def test_two_workers_with_the_same_due_delete_send_one(make_rental, fake_upstream: FakeUpstream) -> None:
    rental = make_rental(status=RentalStatus.TERMINATING, cluster_id="cl-1")
    assert removal.cluster_delete_claim(rental_id=rental.pk)
    assert not removal.cluster_delete_claim(rental_id=rental.pk)


def test_a_new_terminate_after_a_refusal_is_not_held_back_by_the_old_backoff(
    make_rental, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock, olga
) -> None:
    from rentals.services import rental_terminate

    rental = make_rental(
        status=RentalStatus.READY, cluster_id="cl-1", next_delete_at=clock.now + timedelta(minutes=5), delete_attempts=4
    )
    assert rental_terminate(rental=rental, actor=olga, reason="again")
    rental = Rental.objects.get(pk=rental.pk)
    assert rental.next_delete_at is None and rental.delete_attempts == 0
    assert removal.cluster_delete_claim(rental_id=rental.pk)


def test_the_delete_backoff_grows_with_jitter_up_to_its_cap(settings) -> None:
    settings.CLUSTER_DELETE_BACKOFF_BASE_SECONDS = 15
    settings.CLUSTER_DELETE_BACKOFF_CAP_SECONDS = 120
    delays = [removal.delete_backoff(attempts=n) for n in range(1, 10)]
    assert all(7.5 <= delay <= 120 for delay in delays)
    assert removal.delete_backoff(attempts=9) >= 60, "at the cap: between half and all of it"
