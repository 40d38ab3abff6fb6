"""Reconciling `unknown` rentals against `GET /pods`, staff confirmation, and the sweeper."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from rentals import tasks
from rentals.heartbeats import SWEEPER_HEARTBEAT
from rentals.models import Heartbeat, RentalEvent, RentAttempt
from rentals.states import RentalStatus
from rentals.tracking.reconcile import rental_confirm_reconciliation, rental_reconcile
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream

pytestmark = pytest.mark.django_db


def member(cluster_id: str, executor: str, *, name: str = "train-1") -> dict[str, Any]:
    return {
        "id": f"{cluster_id}-{executor}",
        "status": "RUNNING",
        "cluster_id": cluster_id,
        "pod_name": name,
        "executor": {"id": executor},
    }


@pytest.fixture
def unknown_rental(make_rental):  # type: ignore[no-untyped-def]
    return make_rental(status=RentalStatus.UNKNOWN, possibly_sent=True, attempt_count=3)


# --- reconcile -------------------------------------------------------------------------------------------------


def test_reconcile_finds_the_one_cluster_that_matches_the_order(unknown_rental, fake_upstream: FakeUpstream) -> None:
    fake_upstream.pods = [
        member("cl-1", "exec-a"),
        member("cl-1", "exec-b"),
        member("cl-2", "exec-c", name="someone-else"),
        member("cl-2", "exec-d", name="someone-else"),
        {"id": "solo", "status": "RUNNING", "cluster_id": None, "pod_name": "train-1"},
    ]
    finding = rental_reconcile(rental=unknown_rental)
    assert (finding.result, finding.cluster_ids) == ("match", ["cl-1"])
    event = unknown_rental.events.get(kind=RentalEvent.Kind.RECONCILE)
    assert event.data["result"] == "match" and event.data["cluster_ids"] == ["cl-1"]
    unknown_rental.refresh_from_db()
    assert unknown_rental.status == RentalStatus.UNKNOWN, "finding a match does not settle it: staff confirm"


@pytest.mark.parametrize(
    "pods",
    [
        [],
        [member("cl-1", "exec-a")],  # not the full count
        [member("cl-1", "exec-a"), member("cl-1", "exec-z")],  # other executors
        [member("cl-1", "exec-a", name="x"), member("cl-1", "exec-b", name="x")],  # another pod name
    ],
    ids=["nothing", "partial", "other-nodes", "other-name"],
)
def test_reconcile_reports_no_match(unknown_rental, fake_upstream, pods) -> None:
    fake_upstream.pods = pods
    finding = rental_reconcile(rental=unknown_rental)
    assert (finding.result, finding.cluster_ids) == ("no_match", [])
    assert unknown_rental.events.get(kind=RentalEvent.Kind.RECONCILE).data["result"] == "no_match"


def test_reconcile_reports_ambiguity_when_several_clusters_match(unknown_rental, fake_upstream) -> None:
    fake_upstream.pods = [
        {"id": f"{c}-{e}", "status": "PENDING", "cluster_id": c, "pod_name": "train-1", "executor": {"id": e}}
        for c in ("cl-1", "cl-2")
        for e in ("exec-a", "exec-b")
    ]
    finding = rental_reconcile(rental=unknown_rental)
    assert finding.result == "ambiguous" and sorted(finding.cluster_ids) == ["cl-1", "cl-2"]


@pytest.mark.parametrize(
    "listing",
    [{"pods": []}, "maintenance", [["cl-1-exec-a"]], [{"cluster_id": "cl-1", "status": "RUNNING"}]],
    ids=["object", "string", "row-not-object", "row-without-id"],
)
def test_reconcile_never_reads_an_unreadable_listing_as_no_match(unknown_rental, fake_upstream, monkeypatch, listing):
    import httpx

    from rentals import upstream

    monkeypatch.setattr(fake_upstream, "handle", lambda request: httpx.Response(200, json=listing))
    with pytest.raises(upstream.MalformedAnswer):
        rental_reconcile(rental=unknown_rental)
    assert not unknown_rental.events.filter(kind=RentalEvent.Kind.RECONCILE).exists()


def test_reconcile_skips_a_cluster_created_before_the_order(unknown_rental, fake_upstream) -> None:
    before = (unknown_rental.created_at - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    fake_upstream.pods = [{**member("cl-1", "exec-a"), "created_at": before}, member("cl-1", "exec-b")]
    assert rental_reconcile(rental=unknown_rental).result == "no_match"


# --- confirm ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["", "   "])
def test_confirming_a_reconciliation_requires_a_reason(unknown_rental, olga, reason: str) -> None:
    with pytest.raises(ValidationError):
        rental_confirm_reconciliation(rental=unknown_rental, actor=olga, cluster_id="cl-1", reason=reason)
    unknown_rental.refresh_from_db()
    assert unknown_rental.status == RentalStatus.UNKNOWN


def test_confirming_rented_records_the_cluster_and_starts_tracking(
    unknown_rental, olga, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        assert rental_confirm_reconciliation(
            rental=unknown_rental, actor=olga, cluster_id="cl-1", reason="Found in /pods, ticket 42"
        )
    unknown_rental.refresh_from_db()
    assert unknown_rental.status == RentalStatus.RENTED and unknown_rental.cluster_id == "cl-1"
    event = unknown_rental.events.get(to_status=RentalStatus.RENTED)
    assert event.kind == RentalEvent.Kind.STAFF_ACTION and event.actor == olga and "ticket 42" in event.message
    assert enqueued.of("credential_pods_sync") == [((unknown_rental.credential_id,), None)]


def test_confirming_not_rented_is_final(unknown_rental, olga) -> None:
    assert rental_confirm_reconciliation(
        rental=unknown_rental, actor=olga, cluster_id=None, reason="No cluster in /pods after 24 h"
    )
    unknown_rental.refresh_from_db()
    assert unknown_rental.status == RentalStatus.NOT_RENTED and unknown_rental.is_final


def test_confirming_a_rental_that_is_not_unknown_changes_nothing(make_rental, olga) -> None:
    rental = make_rental(status=RentalStatus.RETRYING)
    assert not rental_confirm_reconciliation(rental=rental, actor=olga, cluster_id="cl-1", reason="guess")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RETRYING


# --- the sweeper -----------------------------------------------------------------------------------------------


def test_the_sweeper_re_enqueues_what_is_due_or_stuck_and_leaves_the_rest(
    make_rental, enqueued: Enqueued, clock: Clock
) -> None:
    now = clock.now
    due_retry = make_rental(
        pod_name="due",
        status=RentalStatus.RETRYING,
        first_sent_at=now - timedelta(minutes=5),
        next_attempt_at=now - timedelta(seconds=30),  # its own delayed message is long overdue: lost
        attempt_count=1,
    )
    just_due_retry = make_rental(
        pod_name="just-due",
        status=RentalStatus.RETRYING,
        first_sent_at=now - timedelta(minutes=5),
        next_attempt_at=now - timedelta(seconds=1),  # its delayed message is on its way
        attempt_count=1,
    )
    later_retry = make_rental(
        pod_name="later",
        status=RentalStatus.RETRYING,
        first_sent_at=now,
        next_attempt_at=now + timedelta(minutes=1),
        attempt_count=1,
    )
    clock.now = now - timedelta(seconds=31)
    stuck_queued = make_rental(pod_name="stuck")
    clock.now = now
    fresh_queued = make_rental(pod_name="fresh")
    expired_lease = make_rental(
        pod_name="expired",
        status=RentalStatus.SENDING,
        attempt_count=1,
        first_sent_at=now,
        lease_until=now - timedelta(seconds=1),
    )
    live_lease = make_rental(
        pod_name="live",
        status=RentalStatus.SENDING,
        attempt_count=1,
        first_sent_at=now,
        lease_until=now + timedelta(seconds=30),
    )
    enqueued.calls.clear()

    result = tasks.rentals_sweep()

    sent = {args[0] for args, _ in enqueued.of("rental_send")}
    assert sent == {due_retry.pk, stuck_queued.pk, expired_lease.pk}
    assert not sent & {just_due_retry.pk, later_retry.pk, fresh_queued.pk, live_lease.pk}
    assert result["enqueued"] == 3 and result["settled"] == 0
    assert Heartbeat.objects.get(name=SWEEPER_HEARTBEAT).at == now

    enqueued.calls.clear()
    tasks.rentals_sweep()
    again = {args[0] for args, _ in enqueued.of("rental_send")}
    assert again == {expired_lease.pk}, "what was just re-sent waits a full interval before another copy"


@pytest.mark.parametrize(("possibly_sent", "settled_as"), [(True, RentalStatus.UNKNOWN), (False, RentalStatus.FAILED)])
def test_the_sweeper_settles_a_retrying_rental_whose_window_closed(
    make_rental, enqueued: Enqueued, clock: Clock, possibly_sent: bool, settled_as: str
) -> None:
    started = clock.now - timedelta(hours=2, seconds=1)  # the window is 2 h here
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=2,
        first_sent_at=started,
        next_attempt_at=started + timedelta(minutes=30),
        possibly_sent=possibly_sent,
    )
    enqueued.calls.clear()
    assert tasks.rentals_sweep()["settled"] == 1
    rental.refresh_from_db()
    assert rental.status == settled_as and rental.next_attempt_at is None
    assert enqueued.of("rental_send") == []


def test_the_sweeper_settles_a_dead_workers_rental_past_the_window_instead_of_resending(
    make_rental, enqueued: Enqueued, clock: Clock
) -> None:
    started = clock.now - timedelta(hours=3)
    rental = make_rental(
        status=RentalStatus.SENDING,
        attempt_count=2,
        first_sent_at=started,
        last_sent_at=started,
        lease_until=started + timedelta(minutes=1),
        possibly_sent=True,
    )
    enqueued.calls.clear()
    assert tasks.rentals_sweep()["settled"] == 1
    rental.refresh_from_db()
    assert rental.status == RentalStatus.UNKNOWN
    assert list(RentAttempt.objects.filter(rental=rental).values_list("number", "classification")) == [
        (2, "inconclusive")
    ]
    assert enqueued.of("rental_send") == []


def test_the_sweeper_starts_one_pod_poller_per_tracked_credential(make_rental, enqueued: Enqueued) -> None:
    first = make_rental(pod_name="a", status=RentalStatus.RENTED, cluster_id="cl-1")
    make_rental(pod_name="b", executors=["exec-c", "exec-d"], status=RentalStatus.READY, cluster_id="cl-2")
    make_rental(pod_name="c", executors=["exec-e", "exec-f"], status=RentalStatus.REFUSED)
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert enqueued.of("credential_pods_sync") == [((first.credential_id,), None)]


def test_the_sweeper_retries_the_delete_of_a_rental_stuck_terminating(
    make_rental, enqueued: Enqueued, clock: Clock
) -> None:
    clock.now -= timedelta(minutes=2)
    stuck = make_rental(pod_name="old", status=RentalStatus.TERMINATING, cluster_id="cl-1")
    clock.advance(minutes=2)
    make_rental(pod_name="new", executors=["exec-c", "exec-d"], status=RentalStatus.TERMINATING, cluster_id="cl-2")
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert enqueued.of("rental_delete_cluster") == [((stuck.pk,), None)]
