"""Changes made outside the dashboard: the account's events followed per credential (against the simulator), landing
on the rental's timeline with their source and moving it; unheld pods listed for operators; a 401 reported once."""

from __future__ import annotations

import logging
import uuid

import pytest

from notifications.models import Delivery
from notifications.services import endpoint_create
from ops import pod_events
from ops.models import PodEventCursor, UnheldPodEvent
from rentals.models import ClusterMember, RentalEvent
from rentals.states import RentalStatus
from rentals.tracking import outside
from tests.conftest import SIM_KEY, SSH_KEY, Simulator
from tests.doubles import Clock

pytestmark = pytest.mark.django_db


def sim_rent(simulator: Simulator, count: int = 2, name: str = "train-1") -> dict:
    """Rent a cluster on the simulator as the dashboard's key would; return its answer (pod_ids, cluster_id)."""
    nodes = [n["id"] for n in simulator.offers()[0]["nodes"][:count]]
    body = {"pod_name": name, "executor_uuids": nodes, "user_public_key": [SSH_KEY]}
    headers = {"X-API-Key": SIM_KEY, "Idempotency-Key": str(uuid.uuid4())}
    return simulator.http.post("/api/executors/cluster/rent", json=body, headers=headers).raise_for_status().json()


@pytest.fixture
def held(simulator: Simulator, make_rental, credential):  # type: ignore[no-untyped-def]
    """A ready rental holding a two-node cluster on the simulator, its members listed."""
    answer = sim_rent(simulator)
    rental = make_rental(status=RentalStatus.READY, cluster_id=answer["cluster_id"], pod_ids=answer["pod_ids"])
    for rank, pod_id in enumerate(answer["pod_ids"]):
        ClusterMember.objects.create(rental=rental, pod_id=pod_id, rank=rank, status="RUNNING")
    return rental


def test_a_rented_clusters_pods_are_known_before_they_are_listed(simulator: Simulator, make_rental, credential) -> None:  # type: ignore[no-untyped-def]
    answer = sim_rent(simulator)
    rental = make_rental(status=RentalStatus.RENTED, cluster_id=answer["cluster_id"], pod_ids=answer["pod_ids"])
    pod_id = answer["pod_ids"][0]
    assert outside.rentals_by_pod(credential_id=credential.pk, pod_ids={pod_id, "other"}) == {pod_id: rental.pk}


def follow(credential, clock: Clock) -> int | None:  # type: ignore[no-untyped-def]
    clock.advance(minutes=1)  # one follow per interval: the next one is due
    return pod_events.credential_events_follow(credential_id=credential.pk)


def timeline(rental) -> list[str]:  # type: ignore[no-untyped-def]
    return list(RentalEvent.objects.filter(rental=rental).values_list("message", flat=True))


def test_a_cluster_deleted_from_the_portal_ends_terminated_with_its_source(
    simulator: Simulator, held, credential, acme, alice, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    endpoint, _secret = endpoint_create(customer=acme, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice)
    for pod_id in held.pod_ids:
        simulator.out_of_band("delete_pod", pod_id, actor="portal")
    with django_capture_on_commit_callbacks():
        assert follow(credential, clock)
    held.refresh_from_db()
    assert held.status == RentalStatus.TERMINATED
    said = timeline(held)
    assert any("removed outside the dashboard" in line and "the Lium portal" in line for line in said)
    assert any(line.startswith("Lium: pod-delete.started") and "the Lium portal" in line for line in said)
    assert "outside the dashboard by the Lium portal" in held.error_message  # the customer's page says why
    assert Delivery.objects.filter(endpoint=endpoint, event__rental=held, event__type="rental.terminated").exists()
    # Both removals came in one look: terminated at once, not degraded on the way (no "degraded" message).
    assert not RentalEvent.objects.filter(rental=held, to_status=RentalStatus.DEGRADED).exists()
    # The page no longer offers SSH lines to pods that are gone.
    assert set(held.members.values_list("status", flat=True)) == {"GONE"}
    # Gone from when Lium removed them (their cost stops then), not from when the dashboard heard of it.
    started = {
        data["lium_event"]["pod_id"]: data["lium_event"]["created_at"]
        for data in RentalEvent.objects.filter(rental=held).values_list("data", flat=True)
        if (data.get("lium_event") or {}).get("sub_event_type") == "pod-delete.started"
    }
    assert {member.pod_id: member.gone_at.isoformat() for member in held.members.all()} == started


def test_one_member_deleted_by_another_key_degrades_the_rental(
    simulator: Simulator, held, credential, clock: Clock
) -> None:
    simulator.out_of_band("delete_pod", held.pod_ids[0], actor="api_key", api_key_name="laptop")
    follow(credential, clock)
    held.refresh_from_db()
    assert held.status == RentalStatus.DEGRADED
    assert any("removed outside the dashboard by API key 'laptop'" in line for line in timeline(held))
    gone, running = (held.members.get(pod_id=pod_id) for pod_id in held.pod_ids)
    assert (gone.status, running.status) == ("GONE", "RUNNING") and gone.gone_at and running.gone_at is None
    assert "API key 'laptop'" in held.error_message


def test_a_reboot_and_a_schedule_from_the_cli_land_on_the_timeline(
    simulator: Simulator, held, credential, clock: Clock
) -> None:
    simulator.out_of_band("reboot_pod", held.pod_ids[0], actor="cli")
    at = "2031-01-01T00:00:00.000Z"
    simulator.out_of_band("schedule_removal", held.pod_ids[1], actor="cli", removal_scheduled_at=at)
    follow(credential, clock)
    held.refresh_from_db()
    assert held.status == RentalStatus.READY  # a reboot proves no failure
    said = timeline(held)
    assert any(line.startswith("Lium: pod-reboot.success") and "the Lium CLI" in line for line in said)
    assert any("removal schedule was changed outside the dashboard by the Lium CLI" in line for line in said)
    assert held.removal_scheduled_at is not None and held.removal_scheduled_at.year == 2031


def test_events_are_not_applied_twice(simulator: Simulator, held, credential, clock: Clock) -> None:
    assert follow(credential, clock)  # the creation events
    first = RentalEvent.objects.filter(rental=held).count()
    assert follow(credential, clock) == 0  # `since` is inclusive upstream: the same events come back, dropped
    assert RentalEvent.objects.filter(rental=held).count() == first
    simulator.out_of_band("reboot_pod", held.pod_ids[0], actor="cli")
    assert follow(credential, clock) == 1
    assert RentalEvent.objects.filter(rental=held).count() == first + 1


def test_a_second_follow_in_the_same_interval_does_nothing(simulator: Simulator, held, credential, clock) -> None:  # type: ignore[no-untyped-def]
    assert follow(credential, clock)
    assert pod_events.credential_events_follow(credential_id=credential.pk) is None


def test_a_backend_closed_to_api_keys_is_reported_once_and_not_asked_in_a_loop(
    simulator: Simulator, credential, clock: Clock, caplog, sam, client_for
) -> None:
    simulator.config(events_for_api_keys=False)
    with caplog.at_level(logging.WARNING, logger="ops.pod_events"):
        for _ in range(3):
            assert follow(credential, clock) is None
    assert len([r for r in caplog.records if "refused the account events" in r.getMessage()]) == 1
    assert len(simulator.requests("user-events")) == 1  # asked once; again only after the retry wait
    assert PodEventCursor.objects.get(credential=credential).refused_at is not None
    page = client_for(sam).get("/ops/pod-events/").content.decode()
    assert "does not open events to" in page


def test_events_about_pods_no_rental_holds_are_listed_for_operators(
    simulator: Simulator, held, credential, clock: Clock, sam, client_for
) -> None:
    stranger = sim_rent(simulator, name="portal-job")  # rented with the same account, not by this dashboard
    simulator.out_of_band("delete_pod", stranger["pod_ids"][0], actor="portal")
    follow(credential, clock)
    listed = UnheldPodEvent.objects.filter(pod_id__in=stranger["pod_ids"])
    assert {e.sub_event_type for e in listed} >= {"pod-create.started", "pod-delete.started"}
    assert not UnheldPodEvent.objects.filter(pod_id__in=held.pod_ids).exists()
    page = client_for(sam).get("/ops/pod-events/").content.decode()
    assert stranger["pod_ids"][0] in page and "the Lium portal" in page
    follow(credential, clock)
    assert UnheldPodEvent.objects.filter(pod_id__in=stranger["pod_ids"]).count() == listed.count()
