"""Automatic reconciliation: an `unknown` rental looks for its own cluster in `GET /pods`, a bounded
number of times with backoff, and settles `rented` with the evidence when exactly one cluster matches."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from common import backoff
from rentals import tasks
from rentals.models import Rental, RentalEvent
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream, error

pytestmark = pytest.mark.django_db


def member(cluster_id: str, executor: str, *, name: str = "train-1", **extra: Any) -> dict[str, Any]:
    return {
        "id": f"{cluster_id}-{executor}",
        "status": "RUNNING",
        "cluster_id": cluster_id,
        "pod_name": name,
        "executor": {"id": executor},
        **extra,
    }


@pytest.fixture
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff.random, "uniform", lambda low, high: high)


@pytest.fixture
def look_settings(settings):  # type: ignore[no-untyped-def]
    settings.RECONCILE_LOOK_BASE_SECONDS = 15
    settings.RECONCILE_MAX_LOOKS = 4
    return settings


@pytest.fixture
def due_unknown(make_rental, clock: Clock, look_settings):  # type: ignore[no-untyped-def]
    return make_rental(status=RentalStatus.UNKNOWN, possibly_sent=True, attempt_count=1, next_reconcile_at=clock.now)


def test_a_rental_that_becomes_unknown_schedules_its_first_look(
    make_rental,
    fake_upstream: FakeUpstream,
    enqueued: Enqueued,
    clock: Clock,
    no_jitter,
    look_settings,
    django_capture_on_commit_callbacks,
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(409, "idempotency_outcome_unknown", "Outcome unknown")]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(rental.pk) == RentalStatus.UNKNOWN
    rental.refresh_from_db()
    assert rental.next_reconcile_at == clock.now + timedelta(seconds=15) and rental.reconcile_looks == 0
    assert enqueued.of("rental_reconcile_look") == [((rental.pk,), 15.0)]


def test_exactly_one_matching_cluster_settles_rented_with_the_evidence(
    due_unknown: Rental,
    fake_upstream: FakeUpstream,
    enqueued: Enqueued,
    clock: Clock,
    django_capture_on_commit_callbacks,
) -> None:
    fake_upstream.pods = [
        member("cl-1", "exec-a"),
        member("cl-1", "exec-b"),
        member("cl-9", "exec-y", name="someone-else"),
        member("cl-9", "exec-z", name="someone-else"),
    ]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_reconcile_look(due_unknown.pk) == "rented"
    rental = Rental.objects.get(pk=due_unknown.pk)
    assert rental.status == RentalStatus.RENTED and rental.cluster_id == "cl-1"
    assert sorted(rental.pod_ids) == ["cl-1-exec-a", "cl-1-exec-b"]
    assert rental.last_reconcile_at == clock.now and rental.next_reconcile_at is None
    assert rental.rented_at == clock.now
    settled = rental.events.get(to_status=RentalStatus.RENTED)
    assert "cl-1" in settled.message and "cl-1-exec-a" in settled.message and "exec-b" in settled.message
    assert settled.data["cluster_id"] == "cl-1" and sorted(settled.data["executors"]) == ["exec-a", "exec-b"]
    assert enqueued.of("credential_pods_sync") == [((rental.credential_id,), None)], "members are tracked now"


def test_two_candidate_clusters_keep_it_unknown_and_say_so(
    due_unknown: Rental, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock
) -> None:
    fake_upstream.pods = [member(c, e) for c in ("cl-1", "cl-2") for e in ("exec-a", "exec-b")]
    assert tasks.rental_reconcile_look(due_unknown.pk) == "ambiguous"
    rental = Rental.objects.get(pk=due_unknown.pk)
    assert rental.status == RentalStatus.UNKNOWN and rental.last_reconcile_at == clock.now
    assert rental.next_reconcile_at is None, "another look cannot choose: an operator must"
    finding = rental.events.filter(kind=RentalEvent.Kind.RECONCILE).last()
    assert finding is not None
    assert finding.data["result"] == "ambiguous" and sorted(finding.data["cluster_ids"]) == ["cl-1", "cl-2"]
    assert enqueued.of("rental_reconcile_look") == []


def test_no_cluster_keeps_it_unknown_with_the_time_of_the_look_and_looks_again_later(
    due_unknown: Rental, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock, no_jitter
) -> None:
    assert tasks.rental_reconcile_look(due_unknown.pk) == "no_match"
    rental = Rental.objects.get(pk=due_unknown.pk)
    assert (
        rental.status == RentalStatus.UNKNOWN and rental.last_reconcile_at == clock.now and rental.reconcile_looks == 1
    )
    assert rental.next_reconcile_at == clock.now + timedelta(seconds=30)
    assert enqueued.of("rental_reconcile_look") == [((rental.pk,), 30.0)]
    assert tasks.rental_reconcile_look(rental.pk) == "not-due", "an early copy lists nothing"
    assert fake_upstream.pod_listings == 1


def test_the_cluster_that_appears_later_is_found_by_a_later_look(
    due_unknown: Rental, fake_upstream: FakeUpstream, clock: Clock, no_jitter
) -> None:
    assert tasks.rental_reconcile_look(due_unknown.pk) == "no_match"
    fake_upstream.pods = [member("cl-1", "exec-a"), member("cl-1", "exec-b")]
    clock.advance(seconds=30)
    assert tasks.rental_reconcile_look(due_unknown.pk) == "rented"
    assert Rental.objects.get(pk=due_unknown.pk).cluster_id == "cl-1"


def test_looking_stops_after_a_bounded_number_of_looks_however_often_the_sweeper_runs(
    due_unknown: Rental, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock
) -> None:
    for _ in range(24 * 60):  # a day of sweeps, a minute apart; every message is delivered at once
        tasks.rentals_sweep()
        for (rental_id,), _countdown in enqueued.of("rental_reconcile_look"):
            assert isinstance(rental_id, int)
            tasks.rental_reconcile_look(rental_id)
        enqueued.calls.clear()
        clock.advance(minutes=1)
    rental = Rental.objects.get(pk=due_unknown.pk)
    assert fake_upstream.pod_listings == 4 and rental.reconcile_looks == 4
    assert (
        rental.status == RentalStatus.UNKNOWN
        and rental.next_reconcile_at is None
        and rental.last_reconcile_at is not None
    )
    last_event = rental.events.last()
    assert last_event is not None and "Stopped looking" in last_event.message


def test_a_failed_pod_listing_counts_as_a_look_and_is_noted(
    due_unknown: Rental, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    from rentals import upstream

    def broken(self):  # type: ignore[no-untyped-def]
        raise upstream.UpstreamUnavailable("Service unavailable")

    monkeypatch.setattr(upstream.LiumClient, "list_pods", broken)
    assert tasks.rental_reconcile_look(due_unknown.pk) == "listing_failed"
    rental = Rental.objects.get(pk=due_unknown.pk)
    assert rental.next_reconcile_at is not None
    assert (
        rental.status == RentalStatus.UNKNOWN and rental.reconcile_looks == 1 and rental.next_reconcile_at > clock.now
    )
    note = rental.events.filter(kind=RentalEvent.Kind.RECONCILE).last()
    assert note is not None and "Could not list" in note.message


def test_the_sweeper_enqueues_an_unknown_rental_whose_look_is_overdue(
    make_rental, enqueued: Enqueued, clock: Clock, look_settings
) -> None:
    overdue = make_rental(status=RentalStatus.UNKNOWN, next_reconcile_at=clock.now - timedelta(minutes=1))
    make_rental(
        pod_name="later",
        executors=["exec-c", "exec-d"],
        status=RentalStatus.UNKNOWN,
        next_reconcile_at=clock.now + timedelta(minutes=1),
    )
    make_rental(pod_name="done", executors=["exec-e", "exec-f"], status=RentalStatus.UNKNOWN, next_reconcile_at=None)
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert enqueued.of("rental_reconcile_look") == [((overdue.pk,), None)]
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert enqueued.of("rental_reconcile_look") == [], "the next sweeps wait before sending a copy"
