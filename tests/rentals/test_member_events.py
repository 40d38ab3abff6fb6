"""Why a member failed: its upstream events, fetched once when it fails, stored on the member."""

from __future__ import annotations

import httpx
import pytest

from rentals import upstream
from rentals.enqueue import MEMBER_EVENTS
from rentals.models import ClusterMember
from rentals.states import RentalStatus
from rentals.tracking import member_events, members
from tests.rentals.fakes import Enqueued, FakeUpstream

pytestmark = pytest.mark.django_db

EVENTS = [
    {"id": "e2", "pod_id": "p2", "event_type": "creation_failed", "message": "GPU 3 fell off the bus",
     "created_at": "2030-01-01T10:05:00Z"},
    {"id": "e1", "pod_id": "p2", "event_type": "created", "message": "Cluster member 1 created",
     "created_at": "2030-01-01T10:00:00Z"},
    {"id": "e3", "pod_id": "p2", "event_type": None, "message": "no type: skipped"},
]  # fmt: skip


def test_pod_events_are_read_oldest_first_and_rows_without_a_type_are_skipped(acme, fake_upstream) -> None:
    fake_upstream.script = [httpx.Response(200, json=EVENTS)]
    events = fake_upstream.client(acme.default_credential).pod_events("p2")
    assert [(event.event_type, event.message) for event in events] == [
        ("created", "Cluster member 1 created"),
        ("creation_failed", "GPU 3 fell off the bus"),
    ]
    assert fake_upstream.requests[-1].url.path == "/api/pods/p2/events"


def test_pod_events_of_an_unknown_pod_are_none_and_a_bad_body_is_an_error(acme, fake_upstream) -> None:
    fake_upstream.script = [
        httpx.Response(404, json={"error": {"code": "pod_not_found", "message": "no"}}),
        httpx.Response(200, json={"events": "not a list"}),
    ]
    client = fake_upstream.client(acme.default_credential)
    assert client.pod_events("gone") == []
    with pytest.raises(upstream.MalformedAnswer):
        client.pod_events("p2")


def pod(rank: int, status: str) -> dict:
    return {"id": f"p{rank + 1}", "status": status, "cluster_id": "cl-1", "cluster_node_index": rank}


def test_a_member_that_fails_gets_one_events_fetch(
    make_rental, fake_upstream: FakeUpstream, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental(status=RentalStatus.RENTED, cluster_id="cl-1", pod_ids=["p1", "p2"])
    fake_upstream.pods = [pod(0, "RUNNING"), pod(1, "CREATION_FAILED")]
    with django_capture_on_commit_callbacks(execute=True):
        members.credential_pods_sync(credential_id=rental.credential_id, force=True)
        members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    failed = ClusterMember.objects.get(rental=rental, pod_id="p2")
    assert [args for args, _ in enqueued.of(MEMBER_EVENTS)] == [(failed.pk,)]
    rental.refresh_from_db()
    assert rental.status == RentalStatus.DEGRADED


def test_the_fetch_stores_the_events_and_the_page_shows_them(
    make_rental, fake_upstream: FakeUpstream, alice, client
) -> None:
    rental = make_rental(status=RentalStatus.DEGRADED, cluster_id="cl-1", pod_ids=["p1", "p2"])
    member = ClusterMember.objects.create(rental=rental, pod_id="p2", rank=1, status="CREATION_FAILED")
    version = rental.version
    fake_upstream.script = [httpx.Response(200, json=EVENTS)]
    assert member_events.member_events_fetch(member_id=member.pk) == 2
    member.refresh_from_db()
    assert member.events[-1]["message"] == "GPU 3 fell off the bus" and member.events_fetched_at is not None
    rental.refresh_from_db()
    assert rental.version == version + 1
    client.force_login(alice)
    page = client.get(f"/rentals/{rental.public_id}/").content.decode()
    assert "GPU 3 fell off the bus" in page and "creation_failed" in page
