"""Delivery to a real HTTP receiver on 127.0.0.1: signed per Standard Webhooks, retried with backoff, isolated."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from notifications.delivery import delivery_attempt, delivery_backoff
from notifications.models import Delivery, Event
from notifications.services import delivery_redeliver, endpoint_create, endpoint_send_test
from notifications.tasks import deliveries_sweep
from tests.notifications.conftest import deliver_all

pytestmark = pytest.mark.django_db


def register(user, url: str, events=("*",)):  # type: ignore[no-untyped-def]
    return endpoint_create(customer=user.memberships.get().customer, url=url, events=list(events), created_by=user)


def make_due(delivery: Delivery) -> None:
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def test_a_delivery_is_signed_and_verifies_with_the_standardwebhooks_package(
    alice, receiver, make_rental, move_rental
) -> None:
    endpoint, secret = register(alice, receiver.url)
    assert secret.startswith("whsec_")
    rental = make_rental(user=alice, status="sending")
    move_rental(rental)
    move_rental(rental, from_status="rented", to_status="ready")
    assert deliver_all() == ["delivered", "delivered"]

    assert [r.path for r in receiver.requests] == ["/hook", "/hook"]
    payloads = [Webhook(secret).verify(r.body, r.headers) for r in receiver.requests]
    assert sorted(p["type"] for p in payloads) == ["rental.ready", "rental.rented"]
    for request, payload in zip(receiver.requests, payloads, strict=True):
        assert request.headers["webhook-id"] == payload["id"]
        assert request.headers["content-type"] == "application/json"
        assert payload["data"]["rental"]["id"] == str(rental.public_id)
        assert payload["data"]["rental"]["customer_ref"] == "acme"
    delivery = Delivery.objects.filter(endpoint=endpoint).first()
    assert delivery is not None
    assert (delivery.status, delivery.last_status_code, delivery.attempt_count) == ("delivered", 200, 1)
    assert delivery.last_response == "thanks" and delivery.last_duration_ms is not None


def test_another_secret_does_not_verify(alice, receiver, make_rental, move_rental) -> None:
    register(alice, receiver.url)
    move_rental(make_rental(user=alice, status="sending"))
    deliver_all()
    _other, other_secret = register(alice, receiver.url + "2")
    with pytest.raises(Exception, match="signature"):
        Webhook(other_secret).verify(receiver.requests[0].body, receiver.requests[0].headers)


def test_a_500_is_retried_with_backoff_and_the_same_webhook_id(
    alice, receiver, make_rental, move_rental, settings, deliveries_enqueued
) -> None:
    settings.WEBHOOK_BACKOFF_BASE_SECONDS = 60
    _endpoint, secret = register(alice, receiver.url)
    receiver.answer(500, b"boom")
    receiver.then(200, b"ok")
    move_rental(make_rental(user=alice, status="sending"))
    delivery = Delivery.objects.get()

    before = timezone.now()
    assert delivery_attempt(delivery_id=delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_status_code, delivery.last_response) == ("pending", 500, "boom")
    # Exponential with jitter: the first wait is between half and all of the base.
    assert delivery.next_attempt_at is not None
    wait = (delivery.next_attempt_at - before).total_seconds()
    assert 30 - 1 <= wait <= 60 + 1
    assert (
        deliveries_enqueued[-1][0] == delivery.pk and 29 <= (deliveries_enqueued[-1][1] or 0) <= 61
    )  # a delayed message
    assert delivery_attempt(delivery_id=delivery.pk) == "not_due"  # an early duplicate does nothing

    make_due(delivery)
    assert delivery_attempt(delivery_id=delivery.pk) == "delivered"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code) == ("delivered", 2, 200)
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery.event_id
    assert first.body == second.body
    assert Webhook(secret).verify(second.body, second.headers)["id"] == delivery.event_id


def test_backoff_grows_exponentially_up_to_the_cap(settings) -> None:
    settings.WEBHOOK_BACKOFF_BASE_SECONDS = 10
    settings.WEBHOOK_BACKOFF_CAP_SECONDS = 7200
    for attempt, ceiling in [(1, 10), (2, 20), (5, 160), (20, 7200)]:
        waits = [delivery_backoff(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits)


def test_retries_stop_when_the_window_is_over(alice, receiver, make_rental, move_rental, settings) -> None:
    settings.WEBHOOK_BACKOFF_BASE_SECONDS = 60
    register(alice, receiver.url)
    receiver.answer(503)
    move_rental(make_rental(user=alice, status="sending"))
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(give_up_at=timezone.now() + timedelta(seconds=5))
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.next_attempt_at is None


def test_a_redelivery_keeps_the_webhook_id(alice, receiver, make_rental, move_rental) -> None:
    _endpoint, secret = register(alice, receiver.url)
    move_rental(make_rental(user=alice, status="sending"))
    deliver_all()
    again = delivery_redeliver(delivery=Delivery.objects.get())
    assert delivery_attempt(delivery_id=again.pk) == "delivered"
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert Webhook(secret).verify(second.body, second.headers)["type"] == "rental.rented"
    assert Delivery.objects.filter(event_id=first.headers["webhook-id"]).count() == 2


def test_a_test_event_reaches_only_that_endpoint(alice, receiver) -> None:
    endpoint, secret = register(alice, receiver.url, events=["rental.ready"])
    register(alice, receiver.url + "-other")
    delivery = endpoint_send_test(endpoint=endpoint)
    assert deliver_all() == ["delivered"]
    (request,) = receiver.requests
    assert request.path == "/hook"
    assert Webhook(secret).verify(request.body, request.headers)["type"] == "webhook.test"
    assert request.headers["webhook-id"] == delivery.event_id


def test_bobs_endpoint_receives_nothing_about_alices_rentals(alice, bob, receiver, make_rental, move_rental) -> None:
    register(alice, receiver.url + "/acme")
    register(bob, receiver.url + "/globex")
    rental = make_rental(user=alice, status="sending")
    move_rental(rental)
    move_rental(rental, from_status="rented", to_status="ready")
    deliver_all()
    assert {r.path for r in receiver.requests} == {"/hook/acme"}
    assert not Delivery.objects.filter(endpoint__customer__name="Globex").exists()
    bobs = make_rental(user=bob, status="sending", pod_name="globex-job")
    move_rental(bobs)
    deliver_all()
    globex_bodies = [json.loads(r.body) for r in receiver.requests if r.path == "/hook/globex"]
    assert [b["data"]["rental"]["customer_ref"] for b in globex_bodies] == ["globex"]


def test_redirects_are_not_followed(alice, receiver, make_rental, move_rental) -> None:
    register(alice, receiver.url)
    receiver.answer(302, b"", {"Location": receiver.url + "/elsewhere"})
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["retry"]
    assert [r.path for r in receiver.requests] == ["/hook"]
    assert "Redirects are not followed" in Delivery.objects.get().last_error


def test_a_huge_answer_is_read_only_up_to_the_cap_and_kept_as_a_short_excerpt(
    alice, receiver, make_rental, move_rental
) -> None:
    register(alice, receiver.url)
    receiver.answer(200, b"x" * (2 * 1024 * 1024))
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["delivered"]
    assert len(Delivery.objects.get().last_response) == 500


def test_an_answer_with_nul_bytes_is_kept_without_them(alice, receiver, make_rental, move_rental) -> None:
    # The receiver is the customer's server: what it answers is stored as an excerpt, and PostgreSQL
    # refuses a NUL in text (the delivery could not be settled).
    register(alice, receiver.url)
    receiver.answer(200, b"ok\x00done")
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["delivered"]
    assert Delivery.objects.get().last_response == "okdone"


def test_an_unreachable_endpoint_is_retried(alice, make_rental, move_rental) -> None:
    from tests.conftest import free_port

    register(alice, f"http://127.0.0.1:{free_port()}/hook")
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["retry"]
    delivery = Delivery.objects.get()
    assert delivery.last_status_code is None and "ConnectError" in delivery.last_error


def test_private_addresses_are_refused_at_delivery_time_in_production(
    alice, receiver, make_rental, move_rental, settings
) -> None:
    register(alice, receiver.url)  # allowed when registered (development settings)
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["retry"]
    assert receiver.requests == []
    assert "private, loopback" in Delivery.objects.get().last_error


def test_the_sweeper_enqueues_deliveries_whose_message_was_lost(
    alice, make_rental, move_rental, deliveries_enqueued
) -> None:
    register(alice, "http://127.0.0.1:9/hook")
    move_rental(make_rental(user=alice, status="sending"))
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=5))
    deliveries_enqueued.clear()
    assert deliveries_sweep() == 1
    assert deliveries_enqueued == [(delivery.pk, None)]
    assert deliveries_sweep() == 0  # marked: the next sweep waits a grace period before another copy


def test_a_deleted_endpoint_takes_its_pending_deliveries_with_it(alice, make_rental, move_rental) -> None:
    endpoint, _ = register(alice, "http://127.0.0.1:9/hook")
    move_rental(make_rental(user=alice, status="sending"))
    endpoint.delete()
    assert Delivery.objects.count() == 0 and Event.objects.count() == 1


def test_delivery_connects_to_the_checked_address_not_a_second_lookup(
    alice, receiver, make_rental, move_rental, monkeypatch
) -> None:
    from notifications.addresses import Target

    port = receiver.url.split(":")[2].split("/")[0]
    url = f"http://hooks.example.test:{port}/hook"
    register(alice, url)
    # As in production: the name was resolved and checked once; delivery must use that address and keep the
    # name in the Host header (and as the TLS server name for https).
    monkeypatch.setattr(
        "notifications.signed_post.url_check", lambda u: Target(url=u, host="hooks.example.test", address="127.0.0.1")
    )
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["delivered"]
    (request,) = receiver.requests
    assert request.headers["host"] == f"hooks.example.test:{port}"
