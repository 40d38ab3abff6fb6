"""A scheduled removal: set, extend, cancel, pushed to every member, under the customer's policy."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.core.exceptions import ValidationError

from rentals.enqueue import REMOVAL_PUSH
from rentals.models import ClusterMember, CustomerRemovalPolicy, Rental
from rentals.removal import policy as removal_policy
from rentals.removal import schedule as removal_schedule
from rentals.states import RentalStatus
from rentals.tracking import members
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready(make_rental):  # type: ignore[no-untyped-def]
    rental = make_rental(status=RentalStatus.READY, cluster_id="cl-1", pod_ids=["p1", "p2"])
    for rank in (0, 1):
        ClusterMember.objects.create(rental=rental, pod_id=f"p{rank + 1}", rank=rank, status="RUNNING")
    return rental


def test_scheduling_sets_the_time_records_it_and_enqueues_the_push(
    ready, alice, clock: Clock, enqueued, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        at = removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=3)
    ready.refresh_from_db()
    assert ready.removal_scheduled_at == at == clock() + timedelta(hours=3)
    event = ready.events.get(data__action="schedule_removal")
    assert (event.kind, event.actor) == ("state", alice) and "UTC" in event.message
    assert len(enqueued.of(REMOVAL_PUSH)) == 1


def test_moving_the_time_says_what_it_was(ready, alice, clock: Clock) -> None:
    first = removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=2)
    later = removal_schedule.rental_schedule_removal(rental=ready, actor=alice, at=first + timedelta(hours=5))
    assert later == first + timedelta(hours=5)
    event = ready.events.filter(data__action="schedule_removal").last()
    assert f"was {first:%Y-%m-%d %H:%M} UTC" in event.message


@pytest.mark.parametrize(
    ("hours", "at", "code"),
    [
        (0, None, "invalid_hours"),
        (721, None, "invalid_hours"),
        (None, None, "hours_or_at"),
        (2, datetime(2100, 1, 1, tzinfo=UTC), "hours_or_at"),
        (None, datetime(2000, 1, 1, tzinfo=UTC), "time_past"),
        (None, datetime(2000, 1, 1), "naive_time"),
    ],
)
def test_bad_times_are_refused_with_a_reason(ready, alice, hours, at, code) -> None:
    with pytest.raises(ValidationError) as refused:
        removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=hours, at=at)
    assert refused.value.code == code
    ready.refresh_from_db()
    assert ready.removal_scheduled_at is None


def test_a_time_past_720_hours_is_refused(ready, alice, clock: Clock) -> None:
    with pytest.raises(ValidationError, match="within 720 hours"):
        removal_schedule.rental_schedule_removal(rental=ready, actor=alice, at=clock() + timedelta(hours=721))


def test_only_a_cluster_can_be_scheduled(make_rental, alice) -> None:
    queued = make_rental()
    with pytest.raises(ValidationError, match="Only a rented cluster"):
        removal_schedule.rental_schedule_removal(rental=queued, actor=alice, hours=1)


def test_cancel_clears_the_time_and_is_on_the_timeline(
    ready, alice, enqueued, django_capture_on_commit_callbacks
) -> None:
    assert removal_schedule.rental_cancel_removal(rental=ready, actor=alice) is False  # nothing scheduled
    with django_capture_on_commit_callbacks(execute=True):
        removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=3)
        assert removal_schedule.rental_cancel_removal(rental=ready, actor=alice) is True
    ready.refresh_from_db()
    assert ready.removal_scheduled_at is None
    assert ready.events.filter(data__action="cancel_removal").count() == 1
    assert len(enqueued.of(REMOVAL_PUSH)) == 2


def test_an_operator_change_is_a_staff_action(ready, olga) -> None:
    removal_schedule.rental_schedule_removal(rental=ready, actor=olga, hours=3)
    removal_schedule.rental_cancel_removal(rental=ready, actor=olga)
    kinds = set(
        ready.events.filter(data__action__in=["schedule_removal", "cancel_removal"]).values_list("kind", flat=True)
    )
    assert kinds == {"staff_action"}


def _recorder(fake_upstream: FakeUpstream, status: int = 200) -> list[tuple[str, str, dict]]:
    seen: list[tuple[str, str, dict]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, json.loads(request.content or b"{}")))
        return httpx.Response(status, json={"pod_id": "x", "removal_scheduled_at": None})

    fake_upstream.script = [handle] * 10
    return seen


def test_the_push_sends_the_time_to_every_member_and_a_cancel_deletes_it(ready, alice, fake_upstream) -> None:
    at = removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=3)
    seen = _recorder(fake_upstream)
    assert removal_schedule.rental_removal_push(rental_id=ready.pk) == 2
    wanted = at.isoformat().replace("+00:00", "Z")
    assert seen == [
        ("POST", "/api/pods/p1/schedule-removal", {"removal_scheduled_at": wanted}),
        ("POST", "/api/pods/p2/schedule-removal", {"removal_scheduled_at": wanted}),
    ]
    removal_schedule.rental_cancel_removal(rental=ready, actor=alice)
    seen.clear()
    assert removal_schedule.rental_removal_push(rental_id=ready.pk) == 2
    assert [(method, path) for method, path, _ in seen] == [
        ("DELETE", "/api/pods/p1/schedule-removal"),
        ("DELETE", "/api/pods/p2/schedule-removal"),
    ]


def test_the_push_skips_a_member_the_upstream_no_longer_knows(ready, alice, fake_upstream) -> None:
    removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=3)
    _recorder(fake_upstream, status=404)
    assert removal_schedule.rental_removal_push(rental_id=ready.pk) == 0


def test_the_policy_fills_in_a_default_and_refuses_more_than_the_maximum(acme, olga) -> None:
    assert removal_policy.removal_policy_apply(customer=acme, hours=None) is None
    removal_policy.removal_policy_set(customer=acme, default_hours=8, max_hours=48, actor=olga)
    assert removal_policy.removal_policy_apply(customer=acme, hours=None) == 8
    assert removal_policy.removal_policy_apply(customer=acme, hours=48) == 48
    with pytest.raises(ValidationError) as refused:
        removal_policy.removal_policy_apply(customer=acme, hours=49)
    assert "at most 48 hours" in refused.value.error_dict["termination_hours"][0].messages[0]
    removal_policy.removal_policy_set(customer=acme, default_hours=None, max_hours=24, actor=olga)
    assert removal_policy.removal_policy_apply(customer=acme, hours=None) == 24


@pytest.mark.parametrize(("default", "maximum"), [(0, None), (None, 721), (30, 20)])
def test_a_bad_policy_is_refused(acme, olga, default, maximum) -> None:
    with pytest.raises(ValidationError):
        removal_policy.removal_policy_set(customer=acme, default_hours=default, max_hours=maximum, actor=olga)
    assert not CustomerRemovalPolicy.objects.exists()


def test_a_member_may_not_go_past_the_maximum_or_cancel_but_an_operator_may(ready, alice, olga, acme) -> None:
    removal_policy.removal_policy_set(customer=acme, default_hours=None, max_hours=10, actor=olga)
    with pytest.raises(ValidationError, match="at most 10 hours"):
        removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=11)
    removal_schedule.rental_schedule_removal(rental=ready, actor=alice, hours=10)
    with pytest.raises(ValidationError, match="cannot be cancelled"):
        removal_schedule.rental_cancel_removal(rental=ready, actor=alice)
    removal_schedule.rental_schedule_removal(rental=ready, actor=olga, hours=100)
    assert removal_schedule.rental_cancel_removal(rental=ready, actor=olga) is True


def test_the_members_removal_time_is_taken_once_and_not_after_a_cancel(
    make_rental, alice, fake_upstream: FakeUpstream, enqueued: Enqueued
) -> None:
    rental = make_rental(status=RentalStatus.RENTED, cluster_id="cl-1", pod_ids=["p1", "p2"])
    at = "2030-01-01T10:00:00Z"
    fake_upstream.pods = [
        {"id": f"p{rank + 1}", "status": "RUNNING", "cluster_id": "cl-1", "cluster_node_index": rank,
         "removal_scheduled_at": at}
        for rank in (0, 1)
    ]  # fmt: skip
    members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    rental.refresh_from_db()
    assert rental.removal_scheduled_at == datetime(2030, 1, 1, 10, tzinfo=UTC)
    assert rental.events.filter(data__action="adopt_removal").count() == 1
    removal_schedule.rental_cancel_removal(rental=rental, actor=alice)
    # The members still say 10:00 until the worker's cancel lands: that is not taken back.
    members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    rental.refresh_from_db()
    assert rental.removal_scheduled_at is None


def test_when_the_removal_time_comes_the_rental_is_removed_not_left_degraded(
    ready, clock: Clock, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    from rentals.enqueue import CLUSTER_DELETE

    Rental.objects.filter(pk=ready.pk).update(removal_scheduled_at=clock() + timedelta(minutes=5))
    fake_upstream.pods = [
        {"id": f"p{rank + 1}", "status": "RUNNING", "cluster_id": "cl-1", "cluster_node_index": rank} for rank in (0, 1)
    ]
    members.credential_pods_sync(credential_id=ready.credential_id, force=True)
    ready.refresh_from_db()
    assert ready.status == RentalStatus.READY
    clock.advance(minutes=6)
    fake_upstream.pods = [{**pod, "status": "DELETING"} for pod in fake_upstream.pods]
    with django_capture_on_commit_callbacks(execute=True):
        members.credential_pods_sync(credential_id=ready.credential_id, force=True)
    ready.refresh_from_db()
    assert ready.status == RentalStatus.TERMINATING
    assert "scheduled removal" in ready.events.get(to_status=RentalStatus.TERMINATING).message
    assert [args for args, _ in enqueued.of(CLUSTER_DELETE)] == [(ready.pk,)]
