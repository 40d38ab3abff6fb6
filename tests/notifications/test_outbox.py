"""The outbox: an event and its deliveries are written with the state change, in its transaction, or not at all."""

from __future__ import annotations

import json
import re

import pytest
from django.db import transaction

from notifications.models import Delivery, Event
from notifications.services import endpoint_create, event_emit
from rentals.models import Rental

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_endpoint(alice):  # type: ignore[no-untyped-def]
    endpoint, _secret = endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice
    )
    return endpoint


def test_a_transition_writes_the_event_and_one_delivery_per_endpoint(
    alice, acme_endpoint, make_rental, move_rental, deliveries_enqueued, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental(user=alice, status="sending")
    with django_capture_on_commit_callbacks(execute=True):
        assert move_rental(rental)
    event = Event.objects.get()
    assert re.fullmatch(r"msg_[0-9a-f]{32}", event.id)
    body = json.loads(event.body)
    assert set(body) == {"id", "type", "created", "data"}
    assert body["id"] == event.id and body["type"] == "rental.rented"
    shown = body["data"]["rental"]
    assert shown["id"] == str(rental.public_id) and shown["status"] == "rented"
    assert shown["customer_ref"] == "acme" and shown["cluster_id"] == "c-1"
    delivery = Delivery.objects.get()
    assert (delivery.endpoint_id, delivery.status, delivery.kind) == (acme_endpoint.pk, "pending", "webhook")
    # Enqueued only once the transaction committed.
    assert deliveries_enqueued == [(delivery.pk, None)]


def test_the_payload_shows_the_rental_as_the_api_does(alice, acme_endpoint, make_rental, move_rental, client) -> None:
    from api.keys import api_key_create

    rental = make_rental(user=alice, status="sending")
    move_rental(rental)
    _key, text = api_key_create(user=alice, name="k", scopes=["read"])
    api_view = client.get(f"/api/v1/rentals/{rental.public_id}", headers={"X-API-Key": text}).json()
    assert json.loads(Event.objects.get().body)["data"]["rental"] == api_view


def test_a_rolled_back_transition_leaves_no_event_and_no_delivery(
    alice, acme_endpoint, make_rental, move_rental
) -> None:
    rental = make_rental(user=alice, status="sending")
    with pytest.raises(RuntimeError), transaction.atomic():
        assert move_rental(rental)
        assert Event.objects.count() == 1  # written inside the transaction...
        raise RuntimeError("the caller's transaction fails after the transition")
    assert Event.objects.count() == 0 and Delivery.objects.count() == 0  # ...and rolled back with it
    assert Rental.objects.get(pk=rental.pk).status == "sending"


def test_states_without_an_event_and_customers_without_subscribers_write_nothing(
    alice, bob, acme_endpoint, make_rental, move_rental
) -> None:
    assert move_rental(make_rental(user=alice, status="queued"), to_status="sending")  # no event type for `sending`
    assert move_rental(make_rental(user=bob, status="sending"))  # Globex has no endpoint and nobody chose e-mail
    assert Event.objects.count() == 0


def test_each_event_type_follows_its_state(alice, acme_endpoint, make_rental, move_rental) -> None:
    rental = make_rental(user=alice, status="sending")
    move_rental(rental)
    move_rental(rental, from_status="rented", to_status="ready")
    move_rental(rental, from_status="ready", to_status="degraded")
    move_rental(rental, from_status="degraded", to_status="terminating")
    move_rental(rental, from_status="terminating", to_status="terminated")
    refused = make_rental(user=alice, status="sending", pod_name="other")
    move_rental(refused, to_status="refused")
    types = list(Event.objects.order_by("created_at").values_list("type", flat=True))
    assert types == ["rental.rented", "rental.ready", "rental.degraded", "rental.terminated", "rental.refused"]


def test_event_emit_serves_budget_threshold_and_refuses_unknown_types(alice, acme_endpoint) -> None:
    acme = alice.memberships.get().customer
    event = event_emit(customer=acme, type="budget.threshold", data={"threshold_usd": "100.00", "spent_usd": "101"})
    assert event is not None
    assert json.loads(event.body)["data"] == {"threshold_usd": "100.00", "spent_usd": "101"}
    assert Delivery.objects.filter(event=event, endpoint=acme_endpoint).exists()
    with pytest.raises(ValueError, match="Unknown event type"):
        event_emit(customer=acme, type="budget.exceeded", data={})


def test_an_endpoint_gets_only_the_types_it_subscribed_to(alice, make_rental, move_rental) -> None:
    acme = alice.memberships.get().customer
    ready_only, _ = endpoint_create(
        customer=acme, url="http://127.0.0.1:9/a", events=["rental.ready"], created_by=alice
    )
    rental = make_rental(user=alice, status="sending")
    move_rental(rental)
    assert not Delivery.objects.filter(endpoint=ready_only).exists()
    move_rental(rental, from_status="rented", to_status="ready")
    assert Delivery.objects.filter(endpoint=ready_only, event__type="rental.ready").count() == 1
