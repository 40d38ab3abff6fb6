"""Two customers on one Lium account: a cluster (and each of its pods) belongs to at most one rental.

The scenario of issue 24 (defect 1): Acme's order ends `unknown` having rented nothing; Globex then rents the
same free nodes under the same pod name on the same credential. Nothing Acme's rental does may adopt Globex's
cluster: not the automatic look, not an operator's confirmation, not the pods sync, not the database.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import UpstreamCredential
from rentals import tasks
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.orders.order import RentOrder
from rentals.removal import schedule as removal_schedule
from rentals.services import rental_submit, rental_terminate
from rentals.states import RentalStatus
from rentals.tracking import holding, members, reconcile
from rentals.tracking.reconcile import rental_confirm_reconciliation
from tests.conftest import SSH_KEY
from tests.rentals.fakes import EXECUTORS, Clock, FakeUpstream, answer, rented

pytestmark = pytest.mark.django_db


def member(cluster_id: str, executor: str | None, *, name: str = "train-1") -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"{cluster_id}-{executor or 'x'}",
        "status": "RUNNING",
        "cluster_id": cluster_id,
        "pod_name": name,
        "ssh_connect_cmd": f"ssh root@{cluster_id}.example -p 22",
    }
    if executor is not None:
        row["executor"] = {"id": executor}
    return row


def cluster(cluster_id: str, executors: list[str | None] | None = None) -> list[dict[str, Any]]:
    return [member(cluster_id, executor) for executor in (executors or list(EXECUTORS))]


@pytest.fixture
def acme_unknown(make_rental, look_settings, clock: Clock) -> Rental:
    """Alice's order whose outcome is unknown (it rented nothing), due for its automatic look."""
    return make_rental(status=RentalStatus.UNKNOWN, possibly_sent=True, attempt_count=1, next_reconcile_at=clock.now)


@pytest.fixture
def look_settings(settings):  # type: ignore[no-untyped-def]
    settings.RECONCILE_LOOK_BASE_SECONDS = 15
    settings.RECONCILE_MAX_LOOKS = 4
    return settings


@pytest.fixture
def globex_order(bob, globex, clock: Clock, enqueued):  # type: ignore[no-untyped-def]
    """Bob's order for Globex: the same free nodes, the same pod name, the same credential, a minute later."""

    def make(**fields: Any) -> Rental:
        clock.advance(minutes=1)
        order = RentOrder(fabric_id="fab-1", executor_ids=list(EXECUTORS), pod_name="train-1", public_keys=[SSH_KEY])
        rental = rental_submit(user=bob, customer=globex, order=order, customer_ref=globex.customer_ref)
        Rental.objects.filter(pk=rental.pk).update(**fields)
        rental.refresh_from_db()
        return rental

    return make


def last_finding(rental: Rental) -> RentalEvent:
    event = rental.events.filter(kind=RentalEvent.Kind.RECONCILE).last()
    assert event is not None
    return event


# --- the automatic look ------------------------------------------------------------------------------------------


def test_acme_never_adopts_the_cluster_globex_holds(
    acme_unknown: Rental, globex_order, fake_upstream: FakeUpstream, alice
) -> None:
    globex = globex_order(status=RentalStatus.READY, cluster_id="cl-g", pod_ids=["cl-g-exec-a", "cl-g-exec-b"])
    fake_upstream.pods = cluster("cl-g")
    assert tasks.rental_reconcile_look(acme_unknown.pk) != "rented"
    acme = Rental.objects.get(pk=acme_unknown.pk)
    assert acme.status == RentalStatus.UNKNOWN and acme.cluster_id == "" and acme.pod_ids == []
    assert acme.next_reconcile_at is not None, "Acme's own cluster may still appear: it keeps looking"
    finding = last_finding(acme)
    assert finding.data["cluster_ids"] == [], "nothing an operator could confirm"
    assert "cl-g" in finding.message and str(globex.public_id) in finding.message
    [candidate] = finding.data["candidates"]
    assert candidate["cluster_id"] == "cl-g" and candidate["held_by"] == str(globex.public_id)
    assert sorted(candidate["pod_ids"]) == ["cl-g-exec-a", "cl-g-exec-b"]
    assert not rental_terminate(rental=acme, actor=alice, reason="done"), "no DELETE of Globex's cluster"


def test_acme_adopts_its_own_cluster_beside_the_one_globex_holds(
    acme_unknown: Rental, globex_order, fake_upstream: FakeUpstream
) -> None:
    globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    fake_upstream.pods = cluster("cl-g") + cluster("cl-a")
    assert tasks.rental_reconcile_look(acme_unknown.pk) == "rented"
    assert Rental.objects.get(pk=acme_unknown.pk).cluster_id == "cl-a"


@pytest.mark.parametrize(
    "rival_fields",
    [
        {"status": RentalStatus.UNKNOWN, "possibly_sent": True},
        {"status": RentalStatus.RENTED, "possibly_sent": True, "pod_ids": ["p-9"]},
        {"status": RentalStatus.RETRYING, "possibly_sent": True},
    ],
    ids=["globex-unknown", "globex-rented-without-cluster-id", "globex-retrying-after-a-lost-answer"],
)
def test_a_cluster_two_unsettled_orders_match_is_adopted_by_neither(
    acme_unknown: Rental, globex_order, fake_upstream: FakeUpstream, rival_fields: dict[str, Any]
) -> None:
    globex = globex_order(**rival_fields)
    fake_upstream.pods = cluster("cl-g")
    assert tasks.rental_reconcile_look(acme_unknown.pk) != "rented"
    acme = Rental.objects.get(pk=acme_unknown.pk)
    assert acme.status == RentalStatus.UNKNOWN and acme.cluster_id == ""
    [candidate] = last_finding(acme).data["candidates"]
    assert candidate["also_matches"] == [str(globex.public_id)]
    assert str(globex.public_id) in last_finding(acme).message


def test_pod_rows_without_executor_ids_match_no_order(acme_unknown: Rental, fake_upstream: FakeUpstream) -> None:
    fake_upstream.pods = cluster("cl-g", [None, None])
    assert tasks.rental_reconcile_look(acme_unknown.pk) == "no_match"
    assert Rental.objects.get(pk=acme_unknown.pk).status == RentalStatus.UNKNOWN


def test_a_rented_rental_never_learns_a_cluster_another_rental_holds(
    make_rental, globex_order, fake_upstream: FakeUpstream, olga
) -> None:
    acme = make_rental(status=RentalStatus.RENTED, possibly_sent=True, cluster_id="")
    globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    fake_upstream.pods = cluster("cl-g")
    assert reconcile.rental_look(rental=acme, actor=olga).outcome != "found"
    assert Rental.objects.get(pk=acme.pk).cluster_id == ""


# --- staff, the pods sync, the engine, the database ----------------------------------------------------------------


def test_staff_cannot_confirm_a_cluster_another_rental_holds(acme_unknown: Rental, globex_order, olga) -> None:
    globex = globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    with pytest.raises(ValidationError) as refused:
        rental_confirm_reconciliation(rental=acme_unknown, actor=olga, cluster_id="cl-g", reason="looks like it")
    assert "cl-g" in str(refused.value) and str(globex.public_id) in str(refused.value)
    acme = Rental.objects.get(pk=acme_unknown.pk)
    assert acme.status == RentalStatus.UNKNOWN and acme.cluster_id == ""


def test_the_pods_sync_never_attaches_a_pod_of_another_rentals_cluster(
    make_rental, globex_order, fake_upstream: FakeUpstream
) -> None:
    # Acme's confirmed answer named pod ids but no cluster id; those pods now carry Globex's cluster id.
    acme = make_rental(status=RentalStatus.RENTED, possibly_sent=True, pod_ids=["cl-g-exec-a", "cl-g-exec-b"])
    globex = globex_order(status=RentalStatus.RENTED, cluster_id="cl-g")
    fake_upstream.pods = cluster("cl-g")
    members.credential_pods_sync(credential_id=acme.credential_id, force=True)
    acme.refresh_from_db()
    assert acme.cluster_id == "" and not acme.members.exists(), "no SSH line of Globex's on Acme's page"
    assert set(globex.members.values_list("pod_id", flat=True)) == {"cl-g-exec-a", "cl-g-exec-b"}


def test_a_confirmed_answer_naming_a_held_cluster_is_recorded_not_a_crash(
    make_rental, globex_order, fake_upstream: FakeUpstream, engine_settings
) -> None:
    globex = globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    acme = make_rental()
    fake_upstream.script = [rented(cluster_id="cl-g")]
    assert tasks.rental_send(acme.pk) == RentalStatus.RENTED
    acme.refresh_from_db()
    assert acme.cluster_id == "" and acme.pod_ids == [], "the cluster stays with its holder; an operator must look"
    defect = acme.events.get(kind=RentalEvent.Kind.DEFECT)
    assert "cl-g" in defect.message and str(globex.public_id) in defect.message


def test_the_database_refuses_a_second_holder_of_a_cluster_or_a_pod(make_rental, globex_order) -> None:
    acme = make_rental(status=RentalStatus.READY, cluster_id="cl-g")
    globex = globex_order(status=RentalStatus.READY)
    make_rental(pod_name="blank-1", executors=["exec-c", "exec-d"])  # many rentals hold no cluster yet
    with pytest.raises(IntegrityError), transaction.atomic():
        Rental.objects.filter(pk=globex.pk).update(cluster_id="cl-g")
    ClusterMember.objects.create(rental=acme, pod_id="pod-1")
    with pytest.raises(IntegrityError), transaction.atomic():
        ClusterMember.objects.create(rental=globex, pod_id="pod-1")


def test_the_ops_confirmation_of_a_cluster_taken_since_the_look_says_so(
    acme_unknown: Rental, globex_order, olga, client_for
) -> None:
    # An operator's look found cl-g free; Globex's rental has since learned it is its own.
    RentalEvent.objects.create(
        rental=acme_unknown,
        kind=RentalEvent.Kind.RECONCILE,
        message="Found cluster cl-g matching this order.",
        data={"result": "match", "cluster_ids": ["cl-g"]},
    )
    globex = globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    response = client_for(olga).post(
        f"/ops/rentals/{acme_unknown.public_id}/confirm/",
        {"confirm": "on", "outcome": "cl-g", "reason": "the finding said so"},
    )
    assert response.status_code == 200
    assert f"Cluster cl-g already belongs to rental {globex.public_id}" in response.content.decode()
    acme = Rental.objects.get(pk=acme_unknown.pk)
    assert acme.status == RentalStatus.UNKNOWN and acme.cluster_id == ""


def test_a_pod_that_is_another_rentals_member_stays_that_rentals(
    make_rental, globex_order, fake_upstream: FakeUpstream
) -> None:
    globex = globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    ClusterMember.objects.create(rental=globex, pod_id="cl-a-exec-a", status="RUNNING")
    acme = make_rental(status=RentalStatus.RENTED, possibly_sent=True, cluster_id="cl-a")
    fake_upstream.pods = cluster("cl-a")  # a listing that moved Globex's pod under Acme's cluster id
    members.credential_pods_sync(credential_id=acme.credential_id, force=True)
    assert set(acme.members.values_list("pod_id", flat=True)) == {"cl-a-exec-b"}
    assert ClusterMember.objects.get(pod_id="cl-a-exec-a").rental_id == globex.pk


def test_pods_named_by_id_are_attached_only_when_they_carry_no_other_cluster_id(
    make_rental, fake_upstream: FakeUpstream
) -> None:
    acme = make_rental(status=RentalStatus.RENTED, possibly_sent=True, cluster_id="cl-a", pod_ids=["p-1", "p-2"])
    fake_upstream.pods = [{**member("cl-a", "exec-a"), "id": "p-1", "cluster_id": None}]
    fake_upstream.pods.append({**member("cl-z", "exec-b"), "id": "p-2"})  # named by us, carries another cluster
    members.credential_pods_sync(credential_id=acme.credential_id, force=True)
    assert not acme.members.exists(), "a pod carrying cl-z is never cl-a's"
    fake_upstream.pods = [
        {**member("cl-a", executor), "id": pod, "cluster_id": None}
        for pod, executor in (("p-1", "exec-a"), ("p-2", "exec-b"))
    ]
    members.credential_pods_sync(credential_id=acme.credential_id, force=True)
    assert set(acme.members.values_list("pod_id", flat=True)) == {"p-1", "p-2"}


# --- rivals: every order that may have created the cluster, on every credential of the account ----------------------


def test_globex_first_attempt_in_flight_is_a_rival(
    acme_unknown: Rental, globex_order, fake_upstream: FakeUpstream
) -> None:
    # Globex's first attempt is on the wire (nothing answered yet): the cluster listed may well be its own.
    globex = globex_order(status=RentalStatus.SENDING, possibly_sent=False, attempt_count=1)
    fake_upstream.pods = cluster("cl-g")
    assert tasks.rental_reconcile_look(acme_unknown.pk) == "contested"
    acme = Rental.objects.get(pk=acme_unknown.pk)
    assert acme.status == RentalStatus.UNKNOWN and acme.cluster_id == ""
    [candidate] = last_finding(acme).data["candidates"]
    assert candidate["also_matches"] == [str(globex.public_id)]


def test_rival_on_a_second_credential_of_the_same_account(
    acme_unknown: Rental, globex_order, fake_upstream: FakeUpstream
) -> None:
    # A reseller may give each customer its own credential row for the same Lium account.
    other = UpstreamCredential(name="globex-key", customer_ref="globex")
    other.set_secret("same-lium-account-key")
    other.save()
    globex = globex_order(status=RentalStatus.UNKNOWN, possibly_sent=True, attempt_count=1, credential_id=other.pk)
    fake_upstream.pods = cluster("cl-g")
    assert tasks.rental_reconcile_look(acme_unknown.pk) == "contested"
    acme = Rental.objects.get(pk=acme_unknown.pk)
    assert acme.status == RentalStatus.UNKNOWN and acme.cluster_id == ""
    assert str(globex.public_id) in last_finding(acme).message


# --- a confirmed answer naming another rental's pods ---------------------------------------------------------------


def test_acme_removal_push_never_touches_globex_pods(
    make_rental, globex_order, fake_upstream: FakeUpstream, engine_settings
) -> None:
    globex = globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    for pod in ("cl-g-exec-a", "cl-g-exec-b"):
        ClusterMember.objects.create(rental=globex, pod_id=pod, status="RUNNING")
    acme = make_rental()
    # Lium's confirmed answer names Globex's pods and no cluster id.
    body = {"success": True, "message": "ok", "pod_ids": ["cl-g-exec-a", "cl-g-exec-b"]}
    fake_upstream.script = [answer(200, body, headers={"X-Request-Id": "r"})]
    assert tasks.rental_send(acme.pk) == RentalStatus.RENTED
    acme.refresh_from_db()
    assert acme.pod_ids == [], "the pods stay with their holder"
    defect = acme.events.get(kind=RentalEvent.Kind.DEFECT)
    assert "cl-g-exec-a" in defect.message and str(globex.public_id) in defect.message
    Rental.objects.filter(pk=acme.pk).update(removal_scheduled_at=timezone.now() + timedelta(hours=2))
    fake_upstream.script = [answer(200, {"success": True}), answer(200, {"success": True})]
    sent_before = len(fake_upstream.requests)
    assert removal_schedule.rental_removal_push(rental_id=acme.pk) == 0
    assert fake_upstream.requests[sent_before:] == [], "nothing pushed to Globex's pods"


def test_a_removal_push_goes_only_to_the_rentals_own_members(
    make_rental, fake_upstream: FakeUpstream, enqueued, django_capture_on_commit_callbacks
) -> None:
    # The rent answer's pod ids are a claim, not a holding: only member rows the pods sync attached are pushed to.
    acme = make_rental(status=RentalStatus.RENTED, possibly_sent=True, cluster_id="cl-a", pod_ids=["p-1", "p-2"])
    Rental.objects.filter(pk=acme.pk).update(removal_scheduled_at=timezone.now() + timedelta(hours=2))
    fake_upstream.script = [answer(200, {"success": True}), answer(200, {"success": True})]
    assert removal_schedule.rental_removal_push(rental_id=acme.pk) == 0
    # Once the pods sync attaches the members, the removal set before them is pushed to them.
    fake_upstream.pods = [{**member("cl-a", "exec-a"), "id": "p-1"}]
    with django_capture_on_commit_callbacks(execute=True):
        members.credential_pods_sync(credential_id=acme.credential_id, force=True)
    assert enqueued.of("removal_push") == [((acme.pk,), None)]
    fake_upstream.script = [answer(200, {"success": True})]
    sent_before = len(fake_upstream.requests)
    assert removal_schedule.rental_removal_push(rental_id=acme.pk) == 1
    assert ["/p-1/" in r.url.path for r in fake_upstream.requests[sent_before:]] == [True]


def test_a_cluster_taken_in_a_race_with_no_holder_found_is_still_recorded(
    make_rental, globex_order, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    globex_order(status=RentalStatus.READY, cluster_id="cl-g")
    acme = make_rental()
    # Both looks miss the holder (it took the cluster after the first, and e.g. the second read a stale replica):
    # the database still refuses the second holder, and Acme's timeline must say why it has no cluster.
    monkeypatch.setattr(holding, "cluster_holder", lambda **_: None)
    monkeypatch.setattr(holding, "holder_of", lambda **_: None)
    fake_upstream.script = [rented(cluster_id="cl-g")]
    assert tasks.rental_send(acme.pk) == RentalStatus.RENTED
    acme.refresh_from_db()
    assert acme.cluster_id == "" and acme.pod_ids == []
    defect = acme.events.get(kind=RentalEvent.Kind.DEFECT)
    assert "cl-g" in defect.message
