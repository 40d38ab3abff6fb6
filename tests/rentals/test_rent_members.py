"""Member tracking from `GET /pods`: rented → ready / degraded, terminating → terminated, one listing per interval."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import Customer, UpstreamCredential
from rentals import members
from rentals.models import ClusterMember, RentalEvent
from rentals.states import RentalStatus as S
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
    return make_rental(status=S.RENTED, cluster_id="cl-1", pod_ids=["p1", "p2"], possibly_sent=True)


def sync(rental) -> int | None:  # type: ignore[no-untyped-def]
    changed = members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    rental.refresh_from_db()
    return changed


def test_a_rented_cluster_is_ready_when_every_member_runs_with_ssh(rented_rental, fake_upstream: FakeUpstream) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    assert sync(rented_rental) == 1
    assert rented_rental.status == S.READY
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
    assert rented_rental.status == S.RENTED
    assert rented_rental.members.count() == len(rows)


def test_a_member_whose_creation_failed_degrades_the_cluster(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1, "CREATION_FAILED")]
    sync(rented_rental)
    assert rented_rental.status == S.DEGRADED
    event = rented_rental.events.get(to_status=S.DEGRADED)
    assert event.kind == RentalEvent.Kind.MEMBER and "rank 1 CREATION_FAILED" in event.message


def test_a_degraded_cluster_is_ready_again_when_the_member_recovers(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1, "CREATION_FAILED")]
    sync(rented_rental)
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    assert rented_rental.status == S.READY


def test_a_ready_cluster_that_loses_a_member_is_degraded(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    fake_upstream.pods = [pod(0)]
    sync(rented_rental)
    assert rented_rental.status == S.DEGRADED
    gone = rented_rental.members.get(pod_id="p2")
    assert gone.gone_at is not None and gone.status == "GONE"


def test_members_are_found_by_pod_id_when_the_cluster_id_is_not_known(make_rental, fake_upstream) -> None:
    rental = make_rental(status=S.RENTED, cluster_id="", pod_ids=["p1", "p2"])
    fake_upstream.pods = [pod(0, cluster_id="cl-late"), pod(1, cluster_id="cl-late"), pod(5, pod_id="other")]
    sync(rental)
    assert rental.status == S.READY and rental.cluster_id == "cl-late"
    assert set(rental.members.values_list("pod_id", flat=True)) == {"p1", "p2"}


def test_a_terminating_cluster_is_terminated_once_its_pods_are_gone(rented_rental, fake_upstream) -> None:
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rented_rental)
    rented_rental.__class__.objects.filter(pk=rented_rental.pk).update(status=S.TERMINATING)

    fake_upstream.pods = [pod(0, "DELETING"), pod(1, "DELETING")]
    sync(rented_rental)
    assert rented_rental.status == S.TERMINATING, "still being removed"

    fake_upstream.pods = []
    sync(rented_rental)
    assert rented_rental.status == S.TERMINATED
    assert all(m.gone_at is not None for m in rented_rental.members.all())


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
    first = make_rental(pod_name="a", status=S.RENTED, cluster_id="cl-1")
    second = make_rental(pod_name="b", executors=["exec-c", "exec-d"], status=S.RENTED, cluster_id="cl-2")
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
    assert (first.status, second.status) == (S.READY, S.READY)


def test_each_credential_has_its_own_interval(make_rental, alice, fake_upstream, clock: Clock) -> None:
    first = make_rental(status=S.RENTED, cluster_id="cl-1")
    other = UpstreamCredential(name="second", base_url="http://lium.invalid/api")
    other.set_secret("other-key")
    other.save()
    globex = Customer.objects.create(name="Other Co", customer_ref="other", default_credential=other)
    from rentals.services import RentOrder, rental_submit
    from tests.conftest import SSH_KEY

    second = rental_submit(
        user=None,
        customer=globex,
        order=RentOrder(fabric_id="fab-1", executor_ids=["exec-x", "exec-y"], pod_name="other", public_keys=[SSH_KEY]),
        customer_ref=None,
    )
    second.__class__.objects.filter(pk=second.pk).update(status=S.RENTED, cluster_id="cl-9")

    assert members.credential_pods_sync(credential_id=first.credential_id) is not None
    assert members.credential_pods_sync(credential_id=other.pk) is not None
    assert fake_upstream.pod_listings == 2
    keys = [r.headers["X-API-Key"] for r in fake_upstream.requests]
    assert keys == ["sim-demo-key", "other-key"]


def test_no_listing_when_the_credential_has_nothing_to_track(make_rental, fake_upstream) -> None:
    rental = make_rental(status=S.REFUSED)
    assert members.credential_pods_sync(credential_id=rental.credential_id) is None
    assert fake_upstream.pod_listings == 0


def test_a_failed_listing_changes_nothing(rented_rental, fake_upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"detail": "maintenance"})

    monkeypatch.setattr(fake_upstream, "handle", down)
    assert members.credential_pods_sync(credential_id=rented_rental.credential_id, force=True) == 0
    rented_rental.refresh_from_db()
    assert rented_rental.status == S.RENTED and rented_rental.members.count() == 0
