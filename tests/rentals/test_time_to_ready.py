"""Time to ready: a rental records, the first time it is ready, how long that took from its first send; the
members table says how each starting member is doing; estimates are cached, and unknown when Lium fails."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from rentals import estimates
from rentals.models import ClusterMember
from rentals.states import RentalStatus
from rentals.templatetags.time_to_ready import start_progress
from rentals.tracking import members
from tests.rentals.fakes import FakeUpstream
from tests.rentals.test_rent_members import pod

pytestmark = pytest.mark.django_db


def sync(rental) -> None:  # type: ignore[no-untyped-def]
    members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    rental.refresh_from_db()


def test_the_first_ready_records_the_seconds_since_the_first_send(make_rental, fake_upstream, clock) -> None:
    sent = clock.now - timedelta(seconds=95)
    rental = make_rental(status=RentalStatus.RENTED, cluster_id="cl-1", first_sent_at=sent, estimated_ready_seconds=60)
    fake_upstream.pods = [pod(0), pod(1, "PENDING")]
    sync(rental)
    assert (rental.status, rental.ready_at, rental.ready_seconds) == (RentalStatus.RENTED, None, None)
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rental)
    assert rental.status == RentalStatus.READY
    assert (rental.ready_at, rental.ready_seconds) == (clock.now, 95)


def test_a_recovery_after_degraded_keeps_the_first_time_to_ready(make_rental, fake_upstream, clock) -> None:
    rental = make_rental(status=RentalStatus.RENTED, cluster_id="cl-1", first_sent_at=clock.now)
    clock.advance(seconds=30)
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rental)
    fake_upstream.pods = [pod(0), pod(1, "CREATION_FAILED")]
    sync(rental)
    assert rental.status == RentalStatus.DEGRADED
    clock.advance(seconds=600)
    fake_upstream.pods = [pod(0), pod(1)]
    sync(rental)
    assert rental.status == RentalStatus.READY and rental.ready_seconds == 30


@pytest.mark.parametrize(
    ("status", "phase", "eta", "shown"),
    [
        ("PENDING", "pulling image", 18, "est. ready in ~18 s (phase: pulling image)"),
        ("PENDING", "pulling image", 150, "est. ready in ~2 min (phase: pulling image)"),
        ("PENDING", "configuring ssh", 0, "any moment now (phase: configuring ssh)"),
        ("PENDING", "queued", None, "phase: queued"),
        ("RUNNING", "", None, ""),
        ("RUNNING", "configuring ssh", 4, ""),
    ],
)
def test_a_starting_member_shows_its_phase_and_estimate_as_lium_ps_does(status, phase, eta, shown) -> None:
    assert start_progress(ClusterMember(status=status, phase=phase, eta_seconds=eta)) == shown


# --- The estimates module over a fake upstream ----------------------------------------------------------------


def estimate_answer(seconds: int, *, slow: bool = False, warning: str | None = None) -> dict[str, Any]:
    return {"estimated_seconds": seconds, "is_slow_machine": slow, "warning_message": warning}


def answering(fake: FakeUpstream, by_executor: dict[str, Any]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        answer = by_executor[request.url.params["executor_id"]]
        return answer if isinstance(answer, httpx.Response) else httpx.Response(200, json=answer)

    fake.script = [handler] * 20


def test_the_cluster_estimate_is_its_slowest_node_with_the_slow_flags(credential, fake_upstream) -> None:
    answering(fake_upstream, {"a": estimate_answer(20), "b": estimate_answer(75, slow=True, warning="Slow disk")})
    found = estimates.cluster_estimate_read(credential=credential, template_id="t", executor_ids=["a", "b"])
    assert found == estimates.ClusterEstimate(seconds=75, slow_nodes=1, warnings=("Slow disk",), unknown_nodes=0)


def test_one_node_without_an_estimate_makes_the_cluster_unknown(credential, fake_upstream) -> None:
    answering(fake_upstream, {"a": estimate_answer(20), "b": httpx.Response(503, json={})})
    found = estimates.cluster_estimate_read(credential=credential, template_id="t", executor_ids=["a", "b"])
    assert found is not None and not found.known and found.unknown_nodes == 1


def test_estimates_are_cached_per_credential_template_and_node(credential, fake_upstream) -> None:
    answering(fake_upstream, {"a": estimate_answer(20), "b": estimate_answer(30)})
    estimates.cluster_estimate_read(credential=credential, template_id="t", executor_ids=["a", "b"])
    estimates.cluster_estimate_read(credential=credential, template_id="t", executor_ids=["b", "a"])
    assert len(fake_upstream.requests) == 2
    estimates.cluster_estimate_read(credential=credential, template_id="other", executor_ids=["a"])
    assert len(fake_upstream.requests) == 3


def test_a_failure_is_remembered_briefly_so_a_down_lium_is_not_asked_on_every_click(credential, fake_upstream) -> None:
    answering(fake_upstream, {"a": httpx.Response(500, json={})})
    for _ in range(3):
        found = estimates.cluster_estimate_read(credential=credential, template_id="t", executor_ids=["a"])
        assert found is not None and found.seconds is None
    assert len(fake_upstream.requests) == 1


@pytest.mark.parametrize(("seconds", "text"), [(None, ""), (0, "any moment now"), (89, "~89 s"), (90, "~2 min")])
def test_durations_read_as_the_official_client_says_them(seconds, text) -> None:
    assert estimates.duration_text(seconds) == text


# --- Every way to ready records the time (issue 30) -----------------------------------------------------------


def test_a_cluster_kept_after_a_failed_check_records_when_it_became_ready(make_rental, clock) -> None:
    from rentals.verification.choices import fabric_check_keep

    sent = clock.now - timedelta(seconds=400)
    rental = make_rental(status=RentalStatus.CHECK_FAILED, cluster_id="cl-1", first_sent_at=sent, verify_fabric=True)
    assert fabric_check_keep(rental=rental, actor=None)
    rental.refresh_from_db()
    assert (rental.status, rental.ready_at, rental.ready_seconds) == (RentalStatus.READY, clock.now, 400)


def test_a_refused_delete_before_the_first_ready_records_the_time_to_ready(make_rental, fake_upstream, clock) -> None:
    from rentals.removal.deletion import rental_delete_cluster
    from tests.rentals.fakes import error

    sent = clock.now - timedelta(seconds=70)
    # Terminated while its members were still starting; by the refused delete every member runs.
    rental = make_rental(status=RentalStatus.TERMINATING, cluster_id="cl-1", first_sent_at=sent, rented_at=sent)
    for rank in (0, 1):
        ClusterMember.objects.create(rental=rental, pod_id=f"p{rank}", rank=rank, status="RUNNING")
    fake_upstream.script = [error(400, "cluster_locked", "not now")]
    assert rental_delete_cluster(rental_id=rental.pk) == "refused"
    rental.refresh_from_db()
    assert (rental.status, rental.ready_at, rental.ready_seconds) == (RentalStatus.READY, clock.now, 70)
