"""Member tracking from `GET /pods`: rented → ready / degraded, terminating → terminated, one listing per interval."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import Customer, UpstreamCredential
from rentals.models import ClusterMember, RentalEvent
from rentals.states import RentalStatus
from rentals.tracking import members
from rentals.upstream import parse_pods as upstream_parse_pods
from tests.rentals.fakes import Clock, FakeUpstream

pytestmark = pytest.mark.django_db


def pod(
    rank: int, status: str = "RUNNING", *, ssh: bool = True, cluster_id: str = "cl-1", pod_id: str | None = None
) -> dict[str, Any]:
    return {
        "id": pod_id or f"p{rank + 1}",
        "cluster_id": cluster_id,
        "cluster_node_index": rank,
        "cluster_overlay_ip": f"10.0.0.{rank + 1}",
        "status": status,
        "pod_name": "train-1",
        "ssh_connect_cmd": f"ssh root@host -p 22{rank}" if ssh else "",
        "executor": {"id": f"exec-{rank}"},
        "price": "2.50",
        "gpu_count": 8,
    }


@pytest.fixture
def rented_rental(make_rental):  # type: ignore[no-untyped-def]
    return make_rental(status=RentalStatus.RENTED, cluster_id="cl-1", pod_ids=["p1", "p2"], possibly_sent=True)


def sync(rental) -> int | None:  # type: ignore[no-untyped-def]
    changed = members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    rental.refresh_from_db()
    return changed


def test_a_rented_cluster_is_ready_when_every_member_runs_with_ssh(rented_rental, fake_upstream: FakeUpstream) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    assert sync(rented_rental) == 1
    assert rented_rental.status == RentalStatus.READY
    rows = list(ClusterMember.objects.filter(rental=rented_rental).values_list("rank", "overlay_ip", "status"))
    assert rows == [(0, "10.0.0.1", "RUNNING"), (1, "10.0.0.2", "RUNNING")]
    assert all(m.running_since is not None and m.ssh_command for m in rented_rental.members.all())


@pytest.mark.parametrize(
    "rows",
    [[pod(0), pod(1, ssh=False)], [pod(0), pod(1, "PENDING")], [pod(0)], []],
    ids=["no-ssh-yet", "still-starting", "one-not-listed-yet", "none-listed-yet"],
)
def test_a_rented_cluster_stays_rented_until_every_member_is_up(rented_rental, fake_upstream, rows) -> None:
    fake_upstream.pods = rows
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.RENTED
    assert rented_rental.members.count() == len(rows)


def test_a_member_whose_creation_failed_degrades_the_cluster(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1, "CREATION_FAILED")]
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.DEGRADED
    event = rented_rental.events.get(to_status=RentalStatus.DEGRADED)
    assert event.kind == RentalEvent.Kind.MEMBER and "rank 1 CREATION_FAILED" in event.message


def test_a_degraded_cluster_is_ready_again_when_the_member_recovers(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1, "CREATION_FAILED")]
    sync(rented_rental)
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.READY


def test_a_ready_cluster_that_loses_a_member_in_two_listings_is_degraded(rented_rental, fake_upstream, clock) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    fake_upstream.pods = [pod(0)]
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.READY, "one listing without the member proves nothing"
    clock.advance(seconds=3)
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.DEGRADED
    gone = rented_rental.members.get(pod_id="p2")
    assert gone.gone_at is not None and gone.status == "GONE"


def test_a_member_missed_once_and_listed_again_is_not_gone(rented_rental, fake_upstream, clock) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    fake_upstream.pods = [pod(0)]
    sync(rented_rental)
    clock.advance(seconds=3)
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    clock.advance(seconds=3)
    fake_upstream.pods = [pod(0)]
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.READY, "the absences were not consecutive"
    assert rented_rental.members.get(pod_id="p2").status == "RUNNING"


def test_two_listings_without_the_member_closer_than_the_interval_prove_nothing(
    rented_rental, fake_upstream, clock
) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    fake_upstream.pods = []
    sync(rented_rental)
    clock.advance(seconds=1)
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.READY


def test_an_empty_listing_is_not_proof_that_a_ready_cluster_is_lost(rented_rental, fake_upstream, clock) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    fake_upstream.pods = []
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.READY
    clock.advance(seconds=3)
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.DEGRADED
    assert "every member is no longer listed" in rented_rental.events.get(to_status=RentalStatus.DEGRADED).message


@pytest.mark.parametrize(
    "listing",
    [
        {"pods": []},
        "maintenance",
        None,
        ["p1"],
        [{"cluster_id": "cl-1", "status": "RUNNING"}],
        [{"id": "p1", "cluster_id": "cl-1"}],
        [{"id": "p" * 101, "cluster_id": "cl-1", "status": "RUNNING"}],
        [{"id": "p1", "cluster_id": ["cl-1"], "status": "RUNNING"}],
    ],
    ids=["object", "string", "null", "row-string", "no-id", "no-status", "id-too-long", "cluster-not-string"],
)
def test_an_unreadable_listing_concludes_nothing(rented_rental, fake_upstream, monkeypatch, clock, listing) -> None:
    import httpx

    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    monkeypatch.setattr(fake_upstream, "handle", lambda request: httpx.Response(200, json=listing))
    for _ in range(3):
        assert members.credential_pods_sync(credential_id=rented_rental.credential_id, force=True) == 0
        clock.advance(seconds=5)
    rented_rental.refresh_from_db()
    assert rented_rental.status == RentalStatus.READY
    assert all(m.gone_at is None and m.status == "RUNNING" for m in rented_rental.members.all())


def test_rows_of_other_clusters_are_ignored(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1), pod(0, "CREATION_FAILED", cluster_id="cl-other", pod_id="x1")]
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.READY
    assert set(rented_rental.members.values_list("pod_id", flat=True)) == {"p1", "p2"}


# --- what reaches a copy-paste line -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "ssh root@h -p 22; rm -rf ~",
        "ssh root@h -p 22 && reboot",
        "ssh root@$(reboot) -p 22",
        "ssh -oProxyCommand=evil root@h",
        "ssh root@-oProxyCommand=x -p 22",
        "ssh root@h -p 0",
        "ssh root@h -p 65536",
        "ssh root@h\n-p 22",
        "scp root@h -p 22",
        "ssh root@h -p 22 ",
    ],
)
def test_an_ssh_line_not_of_the_documented_form_is_not_stored(rented_rental, fake_upstream, command: str) -> None:
    fake_upstream.pods = [pod(0), {**pod(1), "ssh_connect_cmd": command}]
    sync(rented_rental)
    member = rented_rental.members.get(pod_id="p2")
    assert member.ssh_command == "" and member.status == "RUNNING"
    assert rented_rental.status == RentalStatus.RENTED, "a member without a usable SSH line is not ready"


@pytest.mark.parametrize("command", ["ssh root@198.51.100.7 -p 22001", "ssh ubuntu@node-1.example.com", "ssh a@h -p 1"])
def test_a_documented_ssh_line_is_stored(rented_rental, fake_upstream, command: str) -> None:
    fake_upstream.pods = [pod(0), {**pod(1), "ssh_connect_cmd": command}]
    sync(rented_rental)
    assert rented_rental.members.get(pod_id="p2").ssh_command == command


@pytest.mark.parametrize("overlay", ["10.0.0.1 $(reboot)", "10.0.0.256", "10.0.0.1\nrm -rf ~", "fe80::1", 167772161])
def test_an_overlay_ip_that_is_not_ipv4_never_reaches_a_launch_line(rented_rental, fake_upstream, overlay) -> None:
    from rentals.launch import cluster_launch

    fake_upstream.pods = [pod(0), {**pod(1), "cluster_overlay_ip": overlay}]
    sync(rented_rental)
    assert rented_rental.members.get(pod_id="p2").overlay_ip == ""
    launch = cluster_launch(list(rented_rental.members.all()), gpus_per_node=8)
    assert launch is not None and launch.hostfile == "10.0.0.1 slots=8"
    text = launch.hostfile + launch.torchrun + launch.master_addr
    assert "reboot" not in text and "rm" not in text and "$(" not in text


def test_launch_lines_skip_a_bad_overlay_ip_stored_before_it_was_checked(rented_rental) -> None:
    from rentals.launch import cluster_launch

    bad = ClusterMember(rental=rented_rental, pod_id="p1", rank=0, overlay_ip="10.0.0.1 $(reboot)", gpu_count=8)
    good = ClusterMember(rental=rented_rental, pod_id="p2", rank=1, overlay_ip="10.0.0.2", gpu_count=8)
    launch = cluster_launch([bad, good], gpus_per_node=0)
    assert launch is not None
    assert launch.master_addr == "10.0.0.2" and launch.hostfile == "10.0.0.2 slots=8"
    assert "--master_addr 10.0.0.2 " in launch.torchrun and "reboot" not in launch.torchrun


def test_over_long_or_malformed_row_fields_are_dropped_to_fit_their_columns(rented_rental, fake_upstream) -> None:
    odd = {
        **pod(1, "PENDING"),
        "phase": "x" * 65,
        "executor": {"id": "e" * 101},
        "price": "1e12",
        "estimated_ready_seconds": -5,
        "cluster_node_index": "one",
        "gpu_count": True,
    }
    fake_upstream.pods = [pod(0), odd]
    sync(rented_rental)
    member = rented_rental.members.get(pod_id="p2")
    assert (member.phase, member.executor_id, member.eta_seconds, member.rank) == ("", "", None, None)
    assert member.price_per_hour == 0 and member.gpu_count == 0


def test_members_are_found_by_pod_id_when_the_cluster_id_is_not_known(make_rental, fake_upstream) -> None:
    rental = make_rental(status=RentalStatus.RENTED, cluster_id="", pod_ids=["p1", "p2"])
    fake_upstream.pods = [pod(0, cluster_id="cl-late"), pod(1, cluster_id="cl-late"), pod(5, pod_id="other")]
    sync(rental)
    assert rental.status == RentalStatus.READY and rental.cluster_id == "cl-late"
    assert set(rental.members.values_list("pod_id", flat=True)) == {"p1", "p2"}


def terminate(rental, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    """Move the rental to terminating and have Lium accept its DELETE /clusters/{id}."""
    from rentals.removal.deletion import rental_delete_cluster
    from tests.rentals.fakes import answer

    rental.__class__.objects.filter(pk=rental.pk).update(status=RentalStatus.TERMINATING)
    fake_upstream.script = [
        answer(
            200,
            {
                "cluster_id": "cl-1",
                "success": True,
                "message": "Deletion started for 2 members",
                "pods": [{"pod_id": p, "success": True, "message": "Pod deletion started"} for p in ("p1", "p2")],
            },
        )
    ]
    assert rental_delete_cluster(rental_id=rental.pk) == "started"


def test_a_terminating_cluster_is_terminated_once_its_pods_are_gone_in_two_listings(
    rented_rental, fake_upstream, clock
) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    terminate(rented_rental, fake_upstream)

    fake_upstream.pods = [pod(0, "DELETING"), pod(1, "DELETING")]
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.TERMINATING, "still being removed"

    fake_upstream.pods = []
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.TERMINATING, "one empty listing proves nothing"
    clock.advance(seconds=3)
    sync(rented_rental)
    assert rented_rental.status == RentalStatus.TERMINATED
    assert all(m.gone_at is not None for m in rented_rental.members.all())


def test_an_empty_listing_never_terminates_a_cluster_whose_delete_was_not_accepted(
    rented_rental, fake_upstream, clock
) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    rented_rental.__class__.objects.filter(pk=rented_rental.pk).update(status=RentalStatus.TERMINATING)
    fake_upstream.pods = []
    for _ in range(3):
        sync(rented_rental)
        clock.advance(seconds=5)
    assert rented_rental.status == RentalStatus.TERMINATING


def test_a_terminating_cluster_without_known_members_waits_for_the_delete_to_say_so(
    make_rental, fake_upstream, clock
) -> None:
    from rentals.removal.deletion import rental_delete_cluster
    from tests.rentals.fakes import error

    rental = make_rental(status=RentalStatus.TERMINATING, cluster_id="cl-1")
    fake_upstream.pods = []
    for _ in range(3):
        sync(rental)
        clock.advance(seconds=5)
    assert rental.status == RentalStatus.TERMINATING
    fake_upstream.script = [error(404, "cluster_not_found", "Cluster cl-1 not found")]
    assert rental_delete_cluster(rental_id=rental.pk) == "gone"
    rental.refresh_from_db()
    assert rental.status == RentalStatus.TERMINATED


# --- one listing per interval per credential ----------------------------------------------------------------


def test_the_poller_lists_pods_at_most_once_per_interval_per_credential(
    rented_rental, fake_upstream: FakeUpstream, clock: Clock
) -> None:
    credential_id = rented_rental.credential_id
    fake_upstream.pods = [pod(0, "PENDING"), pod(1, "PENDING")]
    assert members.credential_pods_sync(credential_id=credential_id) is not None
    # Many workers (one per rental, duplicates) ask again within the interval: none of them lists.
    for _ in range(5):
        assert members.credential_pods_sync(credential_id=credential_id) is None
    clock.advance(seconds=2.9)
    assert members.credential_pods_sync(credential_id=credential_id) is None
    assert fake_upstream.pod_listings == 1

    clock.advance(seconds=0.1)  # the 3 s interval has passed
    assert members.credential_pods_sync(credential_id=credential_id) is not None
    assert fake_upstream.pod_listings == 2


def test_one_listing_serves_every_rental_of_the_credential(make_rental, fake_upstream, clock: Clock) -> None:
    first = make_rental(pod_name="a", status=RentalStatus.RENTED, cluster_id="cl-1")
    second = make_rental(pod_name="b", executors=["exec-c", "exec-d"], status=RentalStatus.RENTED, cluster_id="cl-2")
    fake_upstream.pods = [
        pod(0),
        pod(1),
        pod(0, cluster_id="cl-2", pod_id="q1"),
        pod(1, cluster_id="cl-2", pod_id="q2"),
    ]
    assert members.credential_pods_sync(credential_id=first.credential_id) == 2
    assert fake_upstream.pod_listings == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (RentalStatus.READY, RentalStatus.READY)


def test_each_credential_has_its_own_interval(make_rental, alice, fake_upstream, clock: Clock) -> None:
    first = make_rental(status=RentalStatus.RENTED, cluster_id="cl-1")
    other = UpstreamCredential(name="second", base_url="http://lium.invalid/api")
    other.set_secret("other-key")
    other.save()
    globex = Customer.objects.create(name="Other Co", customer_ref="other", default_credential=other)
    from rentals.orders.order import RentOrder
    from rentals.services import rental_submit
    from tests.conftest import SSH_KEY

    second = rental_submit(
        user=None,
        customer=globex,
        order=RentOrder(fabric_id="fab-1", executor_ids=["exec-x", "exec-y"], pod_name="other", public_keys=[SSH_KEY]),
        customer_ref=None,
    )
    second.__class__.objects.filter(pk=second.pk).update(status=RentalStatus.RENTED, cluster_id="cl-9")

    assert members.credential_pods_sync(credential_id=first.credential_id) is not None
    assert members.credential_pods_sync(credential_id=other.pk) is not None
    assert fake_upstream.pod_listings == 2
    keys = [r.headers["X-API-Key"] for r in fake_upstream.requests]
    assert keys == ["sim-demo-key", "other-key"]


def test_no_listing_when_the_credential_has_nothing_to_track(make_rental, fake_upstream) -> None:
    rental = make_rental(status=RentalStatus.REFUSED)
    assert members.credential_pods_sync(credential_id=rental.credential_id) is None
    assert fake_upstream.pod_listings == 0


def test_a_failed_listing_changes_nothing(rented_rental, fake_upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"detail": "maintenance"})

    monkeypatch.setattr(fake_upstream, "handle", down)
    assert members.credential_pods_sync(credential_id=rented_rental.credential_id, force=True) == 0
    rented_rental.refresh_from_db()
    assert rented_rental.status == RentalStatus.RENTED and rented_rental.members.count() == 0


def test_a_member_another_worker_stored_meanwhile_is_updated_not_inserted_twice(rented_rental, fake_upstream) -> None:
    """Two listings can overlap when one takes longer than the poll interval: the second may store a member
    after the first read the rental's members. The first then updates that row instead of failing."""
    fake_upstream.pods = [pod(0, "PENDING"), pod(1, "PENDING")]
    sync(rented_rental)  # the other worker's listing stored both members
    rows = [upstream_parse_pods.pod_row(pod(0)), upstream_parse_pods.pod_row(pod(1))]
    with transaction.atomic():
        members._store_listed_members(rented_rental, rows, existing={}, now=timezone.now())
    assert list(rented_rental.members.order_by("rank").values_list("pod_id", "status")) == [
        ("p1", "RUNNING"),
        ("p2", "RUNNING"),
    ]


def test_a_member_runs_since_its_rows_updated_at_not_since_the_poller_looked(
    rented_rental, fake_upstream, clock: Clock
) -> None:
    """Lium bills a pod from its change to RUNNING (the row's `updated_at`): our cost counts from then too."""
    started = clock.now - timedelta(seconds=7)
    fake_upstream.pods = [
        {**pod(0), "updated_at": started.isoformat()},
        {**pod(1), "updated_at": (clock.now + timedelta(hours=1)).isoformat()},  # a clock ahead: now
    ]
    sync(rented_rental)
    since = dict(ClusterMember.objects.filter(rental=rented_rental).values_list("rank", "running_since"))
    assert since == {0: started, 1: clock.now}
