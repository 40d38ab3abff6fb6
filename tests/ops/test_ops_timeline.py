"""The staff timeline: every state change, attempt, finding, action and view, the stored body and windows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from rentals.models import RentalEvent, RentAttempt
from rentals.transitions import rental_transition

pytestmark = pytest.mark.django_db


def test_the_timeline_shows_a_replayed_attempt_with_its_request_id(make_rental, sam, client_for) -> None:
    sent = timezone.now() - timedelta(minutes=5)
    rental = make_rental(status="ready", first_sent_at=sent, attempt_count=2, cluster_id="cl-1")
    RentAttempt.objects.create(
        rental=rental,
        number=1,
        started_at=sent,
        duration_ms=30000,
        http_status=None,
        classification="inconclusive",
        message="timeout",
    )
    RentAttempt.objects.create(
        rental=rental,
        number=2,
        started_at=sent + timedelta(seconds=40),
        duration_ms=120,
        http_status=200,
        classification="confirmed",
        replayed=True,
        request_id="req-replay-9",
    )
    html = client_for(sam).get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert 'data-testid="replayed"' in html
    assert "req-replay-9" in html and "120 ms" in html
    assert html.index("Attempt 1") < html.index("Attempt 2")


def test_the_timeline_shows_state_changes_staff_actions_body_hash_and_windows(make_rental, olga, client_for) -> None:
    rental = make_rental(status="queued")
    rental_transition(rental_id=rental.pk, from_status="queued", to_status="sending", message="Attempt 1: sending")
    RentalEvent.objects.create(rental=rental, kind="staff_action", actor=olga, message="Nudged. customer asked")
    rental.refresh_from_db()
    rental.first_sent_at = timezone.now()
    rental.save(update_fields=["first_sent_at"])
    html = client_for(olga).get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert "queued → sending" in html
    assert "<strong>olga</strong>" in html and "customer asked" in html
    assert rental.body_sha256 in html
    assert "&quot;executor_uuids&quot;: [" in html, "the body is pretty-printed JSON"
    assert "Lium keeps the key until" in html and "23 h 59 min left" in html


def test_support_views_are_recorded_at_most_once_per_10_minutes(
    make_rental, sam, olga, client_for, monkeypatch
) -> None:
    rental = make_rental()
    url = f"/ops/rentals/{rental.public_id}/"
    client = client_for(sam)
    client.get(url)
    client.get(url)
    views = RentalEvent.objects.filter(rental=rental, kind="support_view")
    assert list(views.values_list("actor__username", "kind")) == [("sam", "support_view")]
    later = timezone.now() + timedelta(minutes=11)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert client.get(url).status_code == 200
    assert views.count() == 2
    client_for(olga).get(url)
    assert views.count() == 2, "operators' views are not support views"
