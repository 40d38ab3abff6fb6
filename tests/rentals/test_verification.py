"""Verified rentals (issue 27) without SSH: the events, a check that must not run, and the customer's keep button.
The SSH path itself: tests/api/test_api_verified_rentals.py (simulator) and tests/fabric_check (the runner)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from notifications.models import Event
from notifications.services import endpoint_create
from rentals import services, tasks
from rentals.fabric_check.keys import check_key_generate
from rentals.models import FabricCheck, Rental, RentalEvent
from rentals.states import RentalStatus
from rentals.transitions import rental_transition
from rentals.verification.records import CheckPlan, fabric_check_create
from tests.rentals.fakes import FakeUpstream, error

pytestmark = pytest.mark.django_db
S = RentalStatus


@pytest.fixture
def verified(make_rental):  # type: ignore[no-untyped-def]
    """Return a function making a verified rental (its check pending, its key encrypted) in a given state."""

    made = iter(range(1, 100))

    def make(status: str, **fields: object) -> Rental:
        number = next(made)
        rental = make_rental(status=status, cluster_id=f"cl-{number}", pod_name=f"train-{number}", **fields)
        fabric_check_create(rental=rental, plan=CheckPlan(key=check_key_generate(), link_rate_gbps=400))
        return Rental.objects.get(pk=rental.pk)

    return make


def test_a_passed_check_announces_verified_and_ready_and_a_failed_one_check_failed(verified, alice, acme) -> None:  # type: ignore[no-untyped-def]
    events = ["rental.ready", "rental.verified", "rental.check_failed"]
    endpoint_create(customer=acme, url="http://127.0.0.1:9/hook", events=events, created_by=alice)
    passing, failing = verified(S.VERIFYING), verified(S.VERIFYING)

    rental_transition(rental_id=passing.pk, from_status=S.VERIFYING, to_status=S.READY)
    rental_transition(rental_id=failing.pk, from_status=S.VERIFYING, to_status=S.CHECK_FAILED)

    assert set(Event.objects.filter(rental=passing).values_list("type", flat=True)) == {
        "rental.ready",
        "rental.verified",
    }
    assert list(Event.objects.filter(rental=failing).values_list("type", flat=True)) == ["rental.check_failed"]


def test_a_rental_that_failed_before_its_check_is_never_connected_to_and_its_key_is_destroyed(
    verified, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    rental = verified(S.DEGRADED)
    connected: list[object] = []
    monkeypatch.setattr("rentals.verification.perform.fabric_check_run_sync", lambda *a, **k: connected.append(a))

    outcome = tasks.rental_fabric_check(rental.pk)

    check = FabricCheck.objects.get(rental=rental)
    assert outcome == "nothing to check" and connected == []
    assert check.private_key_encrypted == "" and check.status == "error"
    assert Rental.objects.get(pk=rental.pk).status == S.DEGRADED


def test_a_check_waiting_for_its_nodes_keeps_its_key_through_the_sweeper(verified) -> None:  # type: ignore[no-untyped-def]
    rental = verified(S.RENTED)

    tasks.rentals_sweep()

    assert FabricCheck.objects.get(rental=rental).private_key_encrypted != ""


def test_a_check_that_cannot_reach_a_member_fails_the_rental_and_says_why(verified) -> None:  # type: ignore[no-untyped-def]
    rental = verified(S.VERIFYING)  # no member has an SSH address yet

    tasks.rental_fabric_check(rental.pk)

    rental.refresh_from_db()
    check = FabricCheck.objects.get(rental=rental)
    assert rental.status == S.CHECK_FAILED and check.status == "error" and check.private_key_encrypted == ""
    assert "could not measure" in rental.events.last().message  # type: ignore[union-attr]


def test_the_customer_keeps_a_failed_cluster_and_the_page_says_unverified(verified, client_for, alice) -> None:  # type: ignore[no-untyped-def]
    rental = verified(S.CHECK_FAILED)
    FabricCheck.objects.filter(rental=rental).update(status="failed", bus_bandwidth_gbps=576, floor_gbps=2240)
    client = client_for(alice)
    before = client.get(f"/rentals/{rental.public_id}/")
    assert b'data-testid="check-keep"' in before.content

    answer = client.post(f"/rentals/{rental.public_id}/check/keep/")

    assert answer.status_code == 302
    rental.refresh_from_db()
    assert rental.status == S.READY
    page = client.get(f"/rentals/{rental.public_id}/").content.decode()
    assert "kept unverified" in page and "576 Gb/s" in page
    assert RentalEvent.objects.filter(rental=rental, from_status=S.CHECK_FAILED, to_status=S.READY).exists()
    assert client.post(f"/rentals/{rental.public_id}/check/keep/").status_code == 302  # a second click: no 500


def test_a_refused_delete_of_a_cluster_whose_check_failed_returns_it_to_check_failed_not_ready(
    verified, fake_upstream: FakeUpstream, alice
) -> None:  # type: ignore[no-untyped-def]
    rental = verified(S.CHECK_FAILED)
    FabricCheck.objects.filter(rental=rental).update(status="failed", finished_at=timezone.now())
    services.rental_terminate(rental=rental, actor=alice)
    fake_upstream.script = [error(403, "forbidden", "This cluster is locked")]

    tasks.rental_delete_cluster(rental.pk)

    rental.refresh_from_db()
    assert rental.status == S.CHECK_FAILED


def test_the_page_lists_every_connection_and_command_the_check_made(verified, client_for, alice) -> None:  # type: ignore[no-untyped-def]
    rental = verified(S.READY)
    FabricCheck.objects.filter(rental=rental).update(status="passed", bus_bandwidth_gbps=2880, floor_gbps=2240)
    audit = [
        {"rank": 0, "action": "connect", "detail": "root@10.0.0.1:22", "outcome": "ok"},
        {"rank": 0, "action": "run", "detail": "cat > c.py <<'PY'\nimport torch\nPY", "outcome": "exit 0"},
    ]
    RentalEvent.objects.create(rental=rental, kind=RentalEvent.Kind.MEMBER, data={"fabric_check_audit": audit})

    page = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()

    assert "root@10.0.0.1:22" in page and "cat &gt; c.py &lt;&lt;&#x27;PY&#x27;" in page
    assert "import torch" not in page, "a command is shown by its first line"


def test_a_refused_delete_of_a_rental_whose_check_never_ran_does_not_claim_a_failed_check(
    verified, fake_upstream: FakeUpstream, alice
) -> None:  # type: ignore[no-untyped-def]
    """Found by the engine model: terminated while rented (its check still pending), then Lium refused the delete."""
    rental = verified(S.RENTED)
    services.rental_terminate(rental=rental, actor=alice)
    fake_upstream.script = [error(403, "forbidden", "This cluster is locked")]

    tasks.rental_delete_cluster(rental.pk)

    rental.refresh_from_db()
    assert rental.status != S.CHECK_FAILED
    assert FabricCheck.objects.get(rental=rental).status == "pending"


def test_a_check_measured_while_the_database_restarts_is_recorded_once_it_is_back(
    verified, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The check ran and removed its key from every member, then the database was gone for a moment as the result
    was written: the result is written once the database is back, not lost. (Run again, the check would find its
    key refused everywhere and call a good fabric unmeasurable, its key 'left on' members that no longer have it.)"""
    from django.db import OperationalError

    from rentals.fabric_check.runner import FabricCheckResult, Member
    from rentals.verification import perform

    rental = verified(S.VERIFYING)
    members = [Member(0, "10.0.0.1", "127.0.0.1", 2201), Member(1, "10.0.0.2", "127.0.0.1", 2202)]
    monkeypatch.setattr(perform, "_members_of", lambda rental: members)
    result = FabricCheckResult(status="passed", floor_gbps=400, bus_bandwidth_gbps=480, key_removed={0: True, 1: True})
    runs: list[object] = []

    def run_once(*args: object, **kwargs: object) -> FabricCheckResult:
        runs.append(args)
        return result

    monkeypatch.setattr(perform, "fabric_check_run_sync", run_once)
    real_move_on, failures = perform._move_on, [OperationalError("server closed the connection unexpectedly")]

    def move_on_after_an_outage(*args: object, **kwargs: object) -> None:
        if failures:
            raise failures.pop()
        real_move_on(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(perform, "_move_on", move_on_after_an_outage)
    monkeypatch.setattr("common.db_outage.RETRY_PAUSE_SECONDS", 0)

    assert tasks.rental_fabric_check(rental.pk) == "passed"

    check = FabricCheck.objects.get(rental=rental)
    assert len(runs) == 1 and failures == []
    assert check.status == "passed" and check.keys_removed is True and check.private_key_encrypted == ""
    assert Rental.objects.get(pk=rental.pk).status == S.READY
