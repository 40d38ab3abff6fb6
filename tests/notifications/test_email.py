"""E-mail: each user chooses the events that reach them; mails go through the outbox (Django's locmem backend)."""

from __future__ import annotations

import pytest
from django.core import mail
from django.utils import timezone

from notifications.models import Delivery
from notifications.services import email_preference_set
from tests.notifications.conftest import deliver_all

pytestmark = pytest.mark.django_db


def test_a_user_gets_only_the_events_they_chose(alice, carol, bob, make_rental, move_rental, client) -> None:
    client.force_login(alice)
    response = client.post("/profile/notifications/", {"events": ["rental.ready", "rental.failed"]})
    assert response.status_code == 302
    rental = make_rental(user=alice, status="sending", pod_name="train-42")
    move_rental(rental)  # rental.rented: alice did not choose it
    assert not Delivery.objects.filter(kind="email").exists()
    move_rental(rental, from_status="rented", to_status="ready")
    (delivery,) = Delivery.objects.filter(kind="email")
    assert delivery.recipient == alice  # carol (no choice made) and bob (another customer) get nothing
    assert deliver_all() == ["delivered"]

    (message,) = mail.outbox
    assert message.to == ["alice@example.com"]
    assert "Cluster ready" in message.subject and "train-42" in message.subject
    assert "Acme Research" in message.body and f"/rentals/{rental.public_id}/" in message.body
    assert message.extra_headers["X-Event-Id"] == delivery.event_id
    delivery.refresh_from_db()
    assert delivery.status == "delivered"


def test_the_preferences_page_shows_and_changes_the_choice(alice, client) -> None:
    email_preference_set(user=alice, events=["rental.degraded"])
    client.force_login(alice)
    page = client.get("/profile/notifications/").content.decode()
    assert page.count("checked") == 1 and 'value="rental.degraded"' in page
    assert client.post("/profile/notifications/", {}).status_code == 302  # nothing ticked: no e-mail
    page = client.get("/profile/notifications/").content.decode()
    assert "checked" not in page


def test_an_unknown_event_type_is_refused_with_a_message(alice, client) -> None:
    client.force_login(alice)
    response = client.post("/profile/notifications/", {"events": ["rental.exploded"]})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()


def test_a_failing_mail_server_is_retried(alice, make_rental, move_rental, settings, monkeypatch) -> None:
    email_preference_set(user=alice, events=["rental.rented"])

    def broken_send(self, fail_silently=False):  # type: ignore[no-untyped-def]
        raise ConnectionRefusedError("mail server down")

    monkeypatch.setattr("django.core.mail.EmailMessage.send", broken_send)
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["retry"]
    assert "mail server down" in Delivery.objects.get().last_error


def test_a_refusal_says_who_refused_lium_after_a_send_the_dashboard_at_a_scheduled_start(
    alice, make_rental, move_rental
) -> None:
    email_preference_set(user=alice, events=["rental.refused"])
    # Lium's refusal carries its request id (the dashboard's own words have none): that, not the send, says who.
    sent = make_rental(
        user=alice,
        status="sending",
        pod_name="sent-1",
        error_message="Executor n-1 is not free",
        error_request_id="req-409",
    )
    sent.attempts.create(number=1, started_at=timezone.now(), duration_ms=40, classification="refused", http_status=409)
    move_rental(sent, to_status="refused")
    scheduled = make_rental(
        user=alice, status="scheduled", pod_name="later-1", error_message="1 selected node(s) are no longer free"
    )
    move_rental(scheduled, to_status="refused")  # the dashboard refused it at its time: nothing reached Lium
    assert deliver_all() == ["delivered", "delivered"]

    by_lium, by_dashboard = sorted(mail.outbox, key=lambda message: "later-1" in message.subject)
    assert "Lium said: Executor n-1 is not free" in by_lium.body
    assert "Why: 1 selected node(s) are no longer free" in by_dashboard.body
    assert "by Lium" not in by_dashboard.subject and "Lium said" not in by_dashboard.body
