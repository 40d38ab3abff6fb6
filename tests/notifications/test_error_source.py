"""Who said it: "Lium said:" only for Lium's own answers (they carry its request id), "Why:" for the dashboard's own
words, on the rental's page and in its e-mail alike, whether or not the order was ever sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
from django.conf import settings
from django.core import mail
from django.utils import timezone

from notifications.services import email_preference_set
from rentals.models import ClusterMember, Rental
from rentals.outcomes import verdict
from rentals.states import RentalStatus
from rentals.tracking import outside
from rentals.transitions import rental_transition
from rentals.upstream import Answer, rent_classify
from rentals.upstream.parse_events import AccountEvent
from tests.notifications.conftest import deliver_all

pytestmark = pytest.mark.django_db


def sent_once(rental: Rental) -> Rental:
    """Record the one send the order had (as the engine does), so the rental has an attempt."""
    rental.attempts.create(number=1, started_at=timezone.now(), duration_ms=40, classification="confirmed")
    Rental.objects.filter(pk=rental.pk).update(attempt_count=1, first_sent_at=timezone.now())
    rental.refresh_from_db()
    return rental


def settle(rental: Rental, result) -> Rental:  # type: ignore[no-untyped-def]
    """Settle a `sending` rental with one classified answer, as the engine does (its verdict's fields)."""
    said = verdict(
        result,
        number=settings.RENT_MAX_ATTEMPTS,
        sent_before=False,
        deadline=None,
        now=timezone.now(),
        promises_idempotency=lambda: True,
    )
    assert rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.SENDING,
        to_status=said.status,
        message=said.message,
        **said.fields,
    )
    rental.refresh_from_db()
    return rental


def banner(client, rental: Rental) -> str:  # type: ignore[no-untyped-def]
    return client.get(f"/rentals/{rental.public_id}/").content.decode()


def one_mail_body() -> str:
    assert deliver_all() == ["delivered"]
    (message,) = mail.outbox
    return str(message.body)


@pytest.fixture
def degraded_outside(alice, make_rental) -> Rental:  # type: ignore[no-untyped-def]
    """A ready rental (sent once) whose member p-1 was deleted from the Lium portal: the dashboard degrades it."""
    email_preference_set(user=alice, events=["rental.degraded"])
    rental = sent_once(make_rental(status=RentalStatus.READY, cluster_id="c-1", pod_ids=["p-1", "p-2"]))
    for rank, pod_id in enumerate(rental.pod_ids):
        ClusterMember.objects.create(rental=rental, pod_id=pod_id, rank=rank, status="RUNNING")
    removed = AccountEvent(
        created_at=datetime.now(UTC),
        event_type="pod",
        sub_event_type="pod-delete.started",
        pod_id="p-1",
        actor={"auth": "session"},
    )
    outside._apply(rental, removed)
    rental.refresh_from_db()
    assert rental.status == RentalStatus.DEGRADED and rental.attempt_count == 1
    assert "removed outside the dashboard" in rental.error_message and not rental.error_request_id
    return rental


def test_a_member_removed_outside_is_not_put_in_liums_mouth_on_the_page(degraded_outside, alice, client_for) -> None:
    page = banner(client_for(alice), degraded_outside)
    assert "removed outside the dashboard" in page
    assert "Lium said" not in page
    assert "<strong>Why:</strong> A member (pod p-1) was removed outside the dashboard" in page


def test_a_member_removed_outside_is_not_put_in_liums_mouth_in_the_email(degraded_outside) -> None:
    body = one_mail_body()
    assert "Lium said" not in body
    assert "Why: A member (pod p-1) was removed outside the dashboard" in body


def test_lium_unreachable_after_sends_is_the_dashboards_description_not_liums(alice, make_rental, client_for) -> None:
    email_preference_set(user=alice, events=["rental.failed"])
    rental = sent_once(make_rental(status=RentalStatus.SENDING))
    failed = settle(rental, rent_classify(None, httpx.ConnectError("connection refused")))
    assert failed.status == RentalStatus.FAILED and failed.attempt_count == 1
    assert failed.error_message == "The Lium API could not be reached (ConnectError)."
    page = banner(client_for(alice), failed)
    assert "Lium said" not in page and "<strong>Why:</strong> The Lium API could not be reached" in page
    body = one_mail_body()
    assert "Lium said" not in body and "Why: The Lium API could not be reached (ConnectError)." in body


def test_a_refusal_by_lium_with_its_request_id_still_says_lium_said(alice, make_rental, client_for) -> None:
    email_preference_set(user=alice, events=["rental.refused"])
    rental = sent_once(make_rental(status=RentalStatus.SENDING))
    envelope = {"error": {"code": "executor_not_free", "message": "Executor n-1 is not free", "hint": ""}}
    answer = Answer(
        status=409, headers=httpx.Headers({"X-Request-Id": "req-refused-1"}), body=json.dumps(envelope).encode()
    )
    refused = settle(rental, rent_classify(answer))
    assert refused.status == RentalStatus.REFUSED and refused.error_request_id == "req-refused-1"
    page = banner(client_for(alice), refused)
    assert "<strong>Lium said:</strong> Executor n-1 is not free" in page and "Why:" not in page
    assert "req-refused-1" in page
    body = one_mail_body()
    assert "Lium said: Executor n-1 is not free (request id req-refused-1)" in body and "Why:" not in body
