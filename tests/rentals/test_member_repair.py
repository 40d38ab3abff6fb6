"""Member repair (issue 27 item 4): one upstream call per click, the member followed back to running, the GPU
reset's result on the timeline, Lium's one-reset-a-minute worded, and bad input refused with a clear message."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.core.exceptions import ValidationError

from rentals import tasks
from rentals.enqueue import PODS_SYNC, REPAIR_SEND, RESET_POLL
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.repair import calls
from rentals.repair import services as repair
from rentals.states import RentalStatus
from rentals.tracking import members
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream, answer, error

pytestmark = pytest.mark.django_db


def pod(rank: int, status: str) -> dict:
    return {
        "id": f"p{rank + 1}",
        "status": status,
        "cluster_id": "cl-1",
        "cluster_node_index": rank,
        "ssh_connect_cmd": f"ssh root@192.0.2.{rank + 1} -p 22",
        "gpu_count": 8,
    }


@pytest.fixture
def ready(make_rental, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks) -> Rental:  # type: ignore[no-untyped-def]
    """A ready two-node rental whose members the pod poller has listed RUNNING."""
    rental = make_rental(status=RentalStatus.READY, cluster_id="cl-1", pod_ids=["p1", "p2"])
    fake_upstream.pods = [pod(0, "RUNNING"), pod(1, "RUNNING")]
    with django_capture_on_commit_callbacks(execute=True):
        members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    return rental


def ask(rental: Rental, alice, action: str = repair.REBOOT, **kwargs) -> RentalEvent:  # type: ignore[no-untyped-def]
    event, _created = repair.member_repair_ask(rental=rental, rank=1, action=action, actor=alice, **kwargs)
    return event


def posts(fake: FakeUpstream, route: str) -> list[httpx.Request]:
    return [r for r in fake.requests if r.method == "POST" and r.url.path.endswith(route)]


def sync(rental: Rental, captured) -> None:  # type: ignore[no-untyped-def]
    with captured(execute=True):
        members.credential_pods_sync(credential_id=rental.credential_id, force=True)


def test_a_double_click_records_one_request_and_sends_one_reboot(
    ready, alice, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first, created = repair.member_repair_ask(rental=ready, rank=1, action=repair.REBOOT, actor=alice, token="t1")
        again, created_again = repair.member_repair_ask(
            rental=ready, rank=1, action=repair.REBOOT, actor=alice, token="t1"
        )
    assert (created, created_again, again.pk) == (True, False, first.pk)
    assert [args for args, _ in enqueued.of(REPAIR_SEND)] == [(first.pk,)]
    fake_upstream.script = [answer(200, {"pod_id": "p2", "status": "REBOOT_PENDING"})]
    assert tasks.member_repair_send(first.pk) == "sent"
    # The message delivered again (or the task retried) finds the request sent: nothing more reaches Lium.
    assert tasks.member_repair_send(first.pk) == "not-due"
    assert len(posts(fake_upstream, "/pods/p2/reboot")) == 1
    first.refresh_from_db()
    assert first.actor == alice and first.data["rank"] == 1 and first.data["state"] == "sent"


def test_another_click_while_a_reboot_is_under_way_is_refused(ready, alice, fake_upstream: FakeUpstream) -> None:
    ask(ready, alice, token="t1")
    with pytest.raises(ValidationError, match="already under way"):
        ask(ready, alice, token="t2")
    fake_upstream.script = [answer(200, {})]
    calls.member_repair_send(event_id=RentalEvent.objects.get(data__repair_token="t1").pk)
    with pytest.raises(ValidationError, match="rebooting, not running"):
        ask(ready, alice, token="t3")


def test_a_rebooted_member_shows_rebooting_and_is_followed_back_to_running(
    ready, alice, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    event = ask(ready, alice, reason="NCCL hang")
    fake_upstream.script = [answer(200, {})]
    with django_capture_on_commit_callbacks(execute=True):
        calls.member_repair_send(event_id=event.pk)
    member = ClusterMember.objects.get(pod_id="p2")
    assert member.status == "REBOOT_PENDING"
    assert enqueued.of(PODS_SYNC), "the pod poller is asked to follow it"

    fake_upstream.pods = [pod(0, "RUNNING"), pod(1, "REBOOT_PENDING")]
    sync(ready, django_capture_on_commit_callbacks)
    enqueued.calls.clear()
    tasks.credential_pods_sync(ready.credential_id)
    assert enqueued.of(PODS_SYNC), "a rebooting member keeps the poller going"
    fake_upstream.pods = [pod(0, "RUNNING"), pod(1, "RUNNING")]
    sync(ready, django_capture_on_commit_callbacks)

    member.refresh_from_db()
    event.refresh_from_db()
    ready.refresh_from_db()
    assert (member.status, event.data["state"], ready.status) == ("RUNNING", "running_again", RentalStatus.READY)
    assert RentalEvent.objects.filter(rental=ready, message="Rank 1 runs again after its reboot.").count() == 1
    assert "NCCL hang" in event.message and "alice" in event.message


def test_a_failed_reboot_degrades_the_rental(
    ready, alice, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    event = ask(ready, alice)
    fake_upstream.script = [answer(200, {}), answer(200, [])]  # the reboot, then the failed member's events
    calls.member_repair_send(event_id=event.pk)
    fake_upstream.pods = [pod(0, "RUNNING"), pod(1, "REBOOT_FAILED")]
    sync(ready, django_capture_on_commit_callbacks)
    ready.refresh_from_db()
    event.refresh_from_db()
    assert (ready.status, event.data["state"]) == (RentalStatus.DEGRADED, "failed")


def test_a_gpu_reset_is_polled_until_its_result_lands_on_the_timeline(
    ready, alice, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    event = ask(ready, alice, action=repair.RESET_GPU)
    fake_upstream.script = [answer(202, {"request_id": "r-9", "status": "running"})]
    with django_capture_on_commit_callbacks(execute=True):
        assert calls.member_repair_send(event_id=event.pk) == "running"
    assert enqueued.of(RESET_POLL) == [((event.pk, 0), repair.RESET_POLL_SECONDS)]
    done = {
        "request_id": "r-9",
        "status": "done",
        "ok": True,
        "container_restarted": False,
        "gpus": [{"index": 0, "uuid": "GPU-a", "result": "reset", "detail": "GPU reset"}],
        "error": None,
    }
    fake_upstream.script = [answer(200, {"request_id": "r-9", "status": "running"}), answer(200, done)]
    enqueued.calls.clear()
    assert tasks.member_reset_gpu_poll(event.pk, 0) is True
    assert tasks.member_reset_gpu_poll(event.pk, 0) is False, "a stale turn reads nothing"
    assert [args for args, _ in enqueued.of(RESET_POLL)] == [(event.pk, 1)]
    assert tasks.member_reset_gpu_poll(event.pk, 1) is False
    event.refresh_from_db()
    assert event.data["state"] == "done" and event.data["gpus"][0]["result"] == "reset"
    assert RentalEvent.objects.filter(rental=ready, message__contains="GPU 0 reset").count() == 1
    assert [r.url.path for r in fake_upstream.requests if "reset-gpu" in r.url.path].count(
        "/api/pods/p2/reset-gpu"
    ) == 1


def test_a_reset_that_never_ends_stops_after_the_bounded_wait(
    ready, alice, fake_upstream: FakeUpstream, clock: Clock
) -> None:
    event = ask(ready, alice, action=repair.RESET_GPU)
    fake_upstream.script = [answer(202, {"request_id": "r-9", "status": "running"})]
    calls.member_repair_send(event_id=event.pk)
    clock.advance(seconds=repair.RESET_WAIT_SECONDS)
    fake_upstream.script = [answer(200, {"request_id": "r-9", "status": "running"})]
    assert calls.member_reset_gpu_poll(event_id=event.pk, turn=0) is None
    event.refresh_from_db()
    assert event.data["state"] == "timeout"


def test_a_second_reset_within_lium_s_minute_is_refused_with_the_seconds_left(
    ready, alice, fake_upstream: FakeUpstream, clock: Clock
) -> None:
    event = ask(ready, alice, action=repair.RESET_GPU)
    fake_upstream.script = [answer(202, {"request_id": "r-9", "status": "running"})]
    calls.member_repair_send(event_id=event.pk)
    RentalEvent.objects.filter(pk=event.pk).update(
        data={**event.data, "state": "done", "sent_at": clock.now.isoformat()}
    )
    clock.advance(seconds=18)
    with pytest.raises(ValidationError) as refused:
        ask(ready, alice, action=repair.RESET_GPU)
    assert refused.value.messages == ["Lium allows one GPU reset per minute per node; try again in 42 s."]
    clock.advance(seconds=42)
    assert ask(ready, alice, action=repair.RESET_GPU).data["state"] == "asked"


def test_lium_s_429_is_worded_for_the_customer(ready, alice, fake_upstream: FakeUpstream) -> None:
    event = ask(ready, alice, action=repair.RESET_GPU)
    fake_upstream.script = [error(429, "rate_limited", "limited", headers={"Retry-After": "17"})]
    assert calls.member_repair_send(event_id=event.pk) == "refused"
    event.refresh_from_db()
    assert event.data["outcome"] == "Lium allows one GPU reset per minute per node; try again in 17 s."


def test_no_answer_is_never_sent_again(ready, alice, fake_upstream: FakeUpstream) -> None:
    event = ask(ready, alice)
    fake_upstream.script = [httpx.ReadTimeout("slow")]
    assert calls.member_repair_send(event_id=event.pk) == "unknown"
    assert calls.member_repair_send(event_id=event.pk) == "not-due"
    assert len(posts(fake_upstream, "/reboot")) == 1


@pytest.mark.parametrize(
    ("rank", "message"),
    [
        (7, "no member of rank 7: its members are ranks 0, 1"),
        ("-1", "The rank must be a whole number"),
        ("x" * 5000, "The rank must be a whole number"),
    ],
)
def test_a_rank_out_of_range_is_refused_clearly(ready, alice, rank, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match=message):
        repair.member_repair_ask(rental=ready, rank=rank, action=repair.REBOOT, actor=alice)
    assert not RentalEvent.objects.filter(data__has_key="repair_token").exists()


def test_a_member_or_rental_that_is_not_running_is_refused(ready, alice) -> None:
    ClusterMember.objects.filter(pod_id="p2").update(status="PENDING")
    with pytest.raises(ValidationError, match="Rank 1 is PENDING, not running"):
        ask(ready, alice)
    Rental.objects.filter(pk=ready.pk).update(status=RentalStatus.TERMINATING)
    ready.refresh_from_db()
    with pytest.raises(ValidationError, match="no running members to repair"):
        ask(ready, alice)


def test_the_sweeper_resends_a_lost_click_and_ends_a_send_whose_worker_died(
    ready, alice, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock, settings
) -> None:
    lost = ask(ready, alice)
    clock.advance(seconds=61)
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert [args for args, _ in enqueued.of(REPAIR_SEND)] == [(lost.pk,)], "a click whose message was lost"
    # A worker claimed it and died during the call: after the lease it is no longer "under way".
    repair.repair_advance(lost.pk, from_state="asked", state="sending", sending_at=clock.now.isoformat())
    clock.advance(seconds=settings.RENT_LEASE_SECONDS + 1)
    tasks.rentals_sweep()
    lost.refresh_from_db()
    assert lost.data["state"] == "unknown"
    assert ask(ready, alice, token="again").data["state"] == "asked", "the customer may click again"
    assert not posts(fake_upstream, "/reboot"), "the sweeper itself never calls Lium"


def test_the_sweeper_restarts_a_lost_reset_poll_at_its_turn(
    ready, alice, fake_upstream: FakeUpstream, enqueued: Enqueued, clock: Clock
) -> None:
    event = ask(ready, alice, action=repair.RESET_GPU)
    fake_upstream.script = [answer(202, {"request_id": "r-9", "status": "running"})]
    calls.member_repair_send(event_id=event.pk)
    fake_upstream.script = [answer(200, {"request_id": "r-9", "status": "running"})]
    calls.member_reset_gpu_poll(event_id=event.pk, turn=0)
    clock.advance(seconds=61)
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert [args for args, _ in enqueued.of(RESET_POLL)] == [(event.pk, 1)]


def test_a_listing_from_before_the_reboot_does_not_count_as_running_again(
    ready, alice, fake_upstream: FakeUpstream, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    event = ask(ready, alice)
    fake_upstream.script = [answer(200, {})]
    calls.member_repair_send(event_id=event.pk)
    before = (clock.now - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    fake_upstream.pods = [pod(0, "RUNNING"), {**pod(1, "RUNNING"), "updated_at": before}]
    sync(ready, django_capture_on_commit_callbacks)
    assert ClusterMember.objects.get(pod_id="p2").status == "REBOOT_PENDING"
    assert not RentalEvent.objects.filter(message="Rank 1 runs again after its reboot.").exists()
    clock.advance(seconds=30)
    after = clock.now.isoformat().replace("+00:00", "Z")
    fake_upstream.pods = [pod(0, "RUNNING"), {**pod(1, "RUNNING"), "updated_at": after}]
    sync(ready, django_capture_on_commit_callbacks)
    assert ClusterMember.objects.get(pod_id="p2").status == "RUNNING"
    assert RentalEvent.objects.filter(message="Rank 1 runs again after its reboot.").count() == 1


def test_a_rate_limited_reboot_is_not_worded_as_a_gpu_reset(ready, alice, fake_upstream: FakeUpstream) -> None:
    event = ask(ready, alice)
    fake_upstream.script = [error(429, "rate_limited", "slow down", headers={"Retry-After": "5"})]
    assert calls.member_repair_send(event_id=event.pk) == "refused"
    event.refresh_from_db()
    assert event.data["outcome"] == "Lium asked to slow down; try again in 5 s."


def test_a_request_lost_for_over_an_hour_no_longer_blocks_a_new_click(
    ready, alice, enqueued: Enqueued, clock: Clock
) -> None:
    ask(ready, alice, token="old")
    clock.advance(hours=1, seconds=1)
    enqueued.calls.clear()
    tasks.rentals_sweep()
    assert not enqueued.of(REPAIR_SEND), "the sweeper looks back one hour only (off the timeline's time index)"
    assert ask(ready, alice, token="new").data["state"] == "asked"
