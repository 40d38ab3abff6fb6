"""A test send or a redelivery is one try, never retried; and an endpoint that never answers holds at most
WEBHOOK_MAX_PENDING_PER_ENDPOINT pending deliveries (the oldest are given up, named so in the log)."""

from __future__ import annotations

import pytest
from django.test import Client

from notifications import events as ev
from notifications.delivery import delivery_attempt
from notifications.models import Delivery
from notifications.services import delivery_redeliver, endpoint_create, endpoint_send_test, event_emit

pytestmark = pytest.mark.django_db


def register(user, url: str):  # type: ignore[no-untyped-def]
    return endpoint_create(customer=user.memberships.get().customer, url=url, events=["*"], created_by=user)[0]


def test_a_test_send_that_fails_is_not_retried_and_the_log_says_so(alice, receiver, deliveries_enqueued) -> None:
    receiver.answer(500, b"down")
    endpoint = register(alice, receiver.url)
    delivery = endpoint_send_test(endpoint=endpoint)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.next_attempt_at) == ("failed", 1, None)
    assert deliveries_enqueued == [], "no retry was scheduled"
    client = Client()
    client.force_login(alice)
    page = client.get(f"/profile/webhooks/{endpoint.pk}/").content.decode()
    assert "not retried" in page


def test_a_redelivery_that_fails_is_not_retried(alice, receiver, deliveries_enqueued) -> None:
    endpoint = register(alice, receiver.url)
    event_emit(customer=endpoint.customer_id, type=ev.BUDGET_THRESHOLD, data={})
    first = Delivery.objects.get()
    receiver.answer(503, b"busy")
    again = delivery_redeliver(delivery=first)
    assert delivery_attempt(delivery_id=again.pk) == "failed"
    again.refresh_from_db()
    assert again.status == "failed" and "not retried" in again.last_error


def test_an_ordinary_event_is_still_retried(alice, receiver) -> None:
    receiver.answer(500, b"down")
    register(alice, receiver.url)
    event_emit(customer=alice.memberships.get().customer, type=ev.BUDGET_THRESHOLD, data={})
    assert delivery_attempt(delivery_id=Delivery.objects.get().pk) == "retry"


def test_an_endpoint_keeps_at_most_the_cap_pending_and_gives_up_the_oldest(alice, settings) -> None:
    settings.WEBHOOK_MAX_PENDING_PER_ENDPOINT = 3
    endpoint = register(alice, "http://127.0.0.1:9/never")
    events = [event_emit(customer=endpoint.customer_id, type=ev.BUDGET_THRESHOLD, data={}) for _ in range(5)]
    pending = Delivery.objects.filter(endpoint=endpoint, status="pending")
    assert sorted(d.event_id for d in pending) == sorted(e.id for e in events[2:] if e), "the newest three wait"
    given_up = Delivery.objects.filter(endpoint=endpoint, status="failed")
    assert sorted(d.event_id for d in given_up) == sorted(e.id for e in events[:2] if e)
    assert all("pending" in d.last_error for d in given_up), "the log says why"


def test_test_sends_count_against_the_cap_too(alice, settings) -> None:
    settings.WEBHOOK_MAX_PENDING_PER_ENDPOINT = 2
    endpoint = register(alice, "http://127.0.0.1:9/never")
    for _ in range(4):
        endpoint_send_test(endpoint=endpoint)
    assert Delivery.objects.filter(endpoint=endpoint, status="pending").count() == 2
