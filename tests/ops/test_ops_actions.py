"""Operator actions: each needs a reason and a confirmation, and lands on the timeline as a staff action."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from rentals import engine, services
from rentals.models import Rental, RentalEvent
from rentals.orders.order import RentOrder
from rentals.states import RentalStatus
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db


def act(client, rental, action: str, **data: str):  # type: ignore[no-untyped-def]
    return client.post(f"/ops/rentals/{rental.public_id}/{action}/", {"confirm": "on", **data})


def staff_actions(rental) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return list(
        RentalEvent.objects.filter(rental=rental, kind="staff_action").values_list("actor__username", "message")
    )


def test_an_action_without_a_reason_or_confirmation_is_refused_and_changes_nothing(
    make_rental, olga, client_for
) -> None:
    rental = make_rental(status=RentalStatus.QUEUED)
    client = client_for(olga)
    no_reason = act(client, rental, "cancel", reason="  ")
    assert no_reason.status_code == 200 and "Say why" in no_reason.content.decode()
    unconfirmed = client.post(f"/ops/rentals/{rental.public_id}/cancel/", {"reason": "customer asked"})
    assert "Tick the box to confirm" in unconfirmed.content.decode()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.QUEUED and staff_actions(rental) == []


def test_the_confirmation_page_works_without_javascript(make_rental, olga, client_for) -> None:
    rental = make_rental(status=RentalStatus.QUEUED)
    html = client_for(olga).get(f"/ops/rentals/{rental.public_id}/cancel/").content.decode()
    assert 'name="reason"' in html and 'name="confirm"' in html
    assert not re.search(r"<script(?![^>]*\bsrc=)|\bon(click|submit)=", html), "no inline script (CSP)"


def test_an_operator_cancels_a_queued_rental_with_a_reason(make_rental, olga, client_for) -> None:
    rental = make_rental(status=RentalStatus.QUEUED)
    response = act(client_for(olga), rental, "cancel", reason="duplicate order, ticket 42")
    assert response.status_code == 302 and response["Location"] == f"/ops/rentals/{rental.public_id}/"
    rental.refresh_from_db()
    assert rental.status == RentalStatus.CANCELLED
    [(who, what)] = staff_actions(rental)
    assert who == "olga" and "ticket 42" in what


def test_an_operator_terminates_a_ready_cluster(
    make_rental, olga, client_for, enqueued, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental(status=RentalStatus.READY, cluster_id="cl-9")
    with django_capture_on_commit_callbacks(execute=True):
        act(client_for(olga), rental, "terminate", reason="customer asked by mail")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.TERMINATING
    assert ("rentals.tasks.rental_delete_cluster", (rental.pk,)) in enqueued.messages()
    [(who, what)] = staff_actions(rental)
    assert who == "olga" and "customer asked by mail" in what


def test_retry_now_makes_a_retrying_rental_due_and_enqueues_it(
    make_rental, olga, client_for, enqueued, django_capture_on_commit_callbacks
) -> None:
    later = timezone.now() + timedelta(minutes=2)
    rental = make_rental(
        status=RentalStatus.RETRYING,
        attempt_count=1,
        first_sent_at=timezone.now() - timedelta(minutes=3),
        next_attempt_at=later,
    )
    with django_capture_on_commit_callbacks(execute=True):
        act(client_for(olga), rental, "retry", reason="upstream is back")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RETRYING and rental.next_attempt_at < later
    # For attempt 2, the turn the retry's own delayed message waits for: whichever comes second does nothing.
    assert ("rentals.tasks.rental_send", (rental.pk, 2)) in enqueued.messages()
    [(who, what)] = staff_actions(rental)
    assert who == "olga" and "same key" in what and "upstream is back" in what


def test_retry_now_is_refused_outside_the_window(make_rental, olga, client_for, enqueued) -> None:
    rental = make_rental(status=RentalStatus.RETRYING, first_sent_at=timezone.now() - timedelta(hours=23, minutes=1))
    client = client_for(olga)
    page = client.get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert "/retry/" not in page and "Too late to send again" in page
    response = act(client, rental, "retry", reason="try anyway")
    assert "Too late to send again" in response.content.decode()
    assert enqueued.calls == [] and staff_actions(rental) == []


@pytest.fixture
def promise(monkeypatch):  # type: ignore[no-untyped-def]
    """Set whether the credential's backend lists rent_idempotency in `GET /version`."""

    def set_promise(promised: bool) -> None:
        monkeypatch.setattr("rentals.idempotency_promise.upstream_promises_idempotency", lambda credential: promised)

    return set_promise


def test_retry_now_replays_an_unknown_rental_when_the_backend_promises_idempotency(
    make_rental, olga, client_for, enqueued, promise, django_capture_on_commit_callbacks
) -> None:
    promise(True)
    rental = make_rental(
        status=RentalStatus.UNKNOWN,
        attempt_count=2,
        first_sent_at=timezone.now() - timedelta(minutes=30),
        possibly_sent=True,
    )
    client = client_for(olga)
    assert f"/ops/rentals/{rental.public_id}/retry/" in client.get(f"/ops/rentals/{rental.public_id}/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = act(client, rental, "retry", reason="worker died, replay")
    assert response.status_code == 302
    rental.refresh_from_db()
    assert (
        rental.status == RentalStatus.RETRYING and ("rentals.tasks.rental_send", (rental.pk, 3)) in enqueued.messages()
    )


def test_retry_now_is_not_offered_when_the_backend_does_not_promise_idempotency(
    make_rental, olga, client_for, enqueued, promise
) -> None:
    promise(False)
    rental = make_rental(
        status=RentalStatus.UNKNOWN, first_sent_at=timezone.now() - timedelta(minutes=30), possibly_sent=True
    )
    client = client_for(olga)
    page = client.get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert "/retry/" not in page and "/reconcile/" in page
    assert "this Lium backend does not promise idempotency" in page
    assert "a re-send could rent twice" in page and "reconcile instead, or ask Lium" in page
    response = act(client, rental, "retry", reason="try anyway")
    assert "does not promise idempotency" in response.content.decode()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.UNKNOWN and enqueued.calls == [] and staff_actions(rental) == []


def test_a_409_outcome_unknown_rental_is_not_offered_a_replay(make_rental, olga, client_for) -> None:
    rental = make_rental(
        status=RentalStatus.UNKNOWN, first_sent_at=timezone.now(), error_code="idempotency_outcome_unknown"
    )
    html = client_for(olga).get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert "/retry/" not in html and "/reconcile/" in html


def test_an_operator_reconciles_an_unknown_rental_against_the_simulator(
    simulator: Simulator, acme, alice, olga, client_for, enqueued, monkeypatch
) -> None:
    offer = simulator.offers()[0]
    order = RentOrder(
        fabric_id=offer["fabric_id"],
        executor_ids=[node["id"] for node in offer["nodes"][:2]],
        pod_name="train-reconcile",
        public_keys=[SSH_KEY],
    )
    rental = services.rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    # The order rents upstream but the answer is lost; every repeat of the key is then 409 outcome-unknown.
    simulator.faults([{"fault": "outcome_unknown", "next": 1, "commit": True}])
    engine.rental_attempt(rental_id=rental.pk)
    Rental.objects.filter(pk=rental.pk, status=RentalStatus.RETRYING).update(next_attempt_at=timezone.now())
    assert engine.rental_attempt(rental_id=rental.pk) == RentalStatus.UNKNOWN
    assert len(simulator.ledger()) == 1

    client = client_for(olga)
    page = client.get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert "/reconcile/" in page and "/retry/" not in page and "/confirm/" not in page
    response = act(client, rental, "reconcile", reason="customer asks if it exists")
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    cluster_id = (
        simulator.ledger()[0].get("cluster_id") or RentalEvent.objects.get(kind="reconcile").data["cluster_ids"][0]
    )
    assert f"Found cluster {cluster_id}" in page
    assert f'value="{cluster_id}"' in page, "the confirmation offers the cluster found"

    act(client, rental, "confirm", outcome=cluster_id, reason="found in the pod list")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RENTED and rental.cluster_id == cluster_id
    actions = staff_actions(rental)
    assert [who for who, _ in actions] == ["olga", "olga"]
    assert "customer asks if it exists" in actions[0][1] and "found in the pod list" in actions[1][1]


def test_confirming_not_rented_settles_the_rental(make_rental, olga, client_for) -> None:
    rental = make_rental(status=RentalStatus.UNKNOWN)
    RentalEvent.objects.create(
        rental=rental,
        kind="reconcile",
        message="No cluster matching this order exists upstream.",
        data={"result": "no_match", "cluster_ids": []},
    )
    act(client_for(olga), rental, "confirm", outcome="not_rented", reason="nothing upstream")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.NOT_RENTED
