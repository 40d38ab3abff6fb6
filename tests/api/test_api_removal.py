"""`POST /api/v1/rentals/{id}/removal` and `DELETE` to cancel: who may, what is checked, what it records."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.removal.policy import removal_policy_set
from rentals.services import rental_submit
from tests.conftest import SSH_KEY
from tests.site.test_url_permissions import add_members

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready(alice, acme, monkeypatch) -> Rental:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name="job", public_keys=[SSH_KEY])
    rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1")
    add_members(rental)
    return rental


def call(user, method: str, rental: Rental, body: object = None, scopes=("read", "manage")):  # type: ignore[no-untyped-def]
    _key, secret = api_key_create(user=user, name="k", scopes=list(scopes))
    client = Client()
    url = f"/api/v1/rentals/{rental.public_id}/removal"
    headers = {"X-API-Key": secret}
    if method == "POST":
        data = body if isinstance(body, str) else json.dumps(body)
        return client.post(url, data, content_type="application/json", headers=headers)
    return client.delete(url, headers=headers)


def test_hours_then_a_time_then_cancel(ready, alice) -> None:
    answer = call(alice, "POST", ready, {"hours": 5})
    assert answer.status_code == 200, answer.content
    at = datetime.fromisoformat(answer.json()["removal_scheduled_at"])
    assert abs(at - (timezone.now() + timedelta(hours=5))) < timedelta(seconds=5)
    wanted = (timezone.now() + timedelta(hours=30)).replace(microsecond=0)
    answer = call(alice, "POST", ready, {"at": wanted.isoformat().replace("+00:00", "Z")})
    assert datetime.fromisoformat(answer.json()["removal_scheduled_at"]) == wanted
    answer = call(alice, "DELETE", ready)
    assert answer.status_code == 200 and answer.json()["removal_scheduled_at"] is None
    assert call(alice, "DELETE", ready).status_code == 200  # nothing scheduled: nothing to do
    assert ready.events.filter(data__action="cancel_removal").count() == 1
    assert answer.json()["members"][0]["jupyter_url"].startswith("http://")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 422, "hours_or_at"),
        ({"hours": 0}, 422, "validation_error"),
        ({"hours": "5"}, 422, "validation_error"),
        ({"hours": 5, "at": "2030-01-01T00:00:00Z"}, 422, "hours_or_at"),
        ({"at": "2000-01-01T00:00:00Z"}, 422, "time_past"),
        ({"at": "2030-01-01T00:00:00"}, 422, "naive_time"),
        ({"at": "not a time"}, 422, "validation_error"),
        ({"minutes": 5}, 422, "validation_error"),
        ("[1]", 400, "invalid_json"),
        ("{", 400, "invalid_json"),
    ],
)
def test_bad_bodies_are_refused_with_the_reason(ready, alice, body, status, code) -> None:
    answer = call(alice, "POST", ready, body)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.content
    assert answer.json()["error"]["message"]


def test_who_may(ready, bob, sam, olga, alice) -> None:
    assert call(bob, "POST", ready, {"hours": 1}).status_code == 404
    assert call(bob, "DELETE", ready).status_code == 404
    assert call(sam, "POST", ready, {"hours": 1}).status_code == 403
    assert call(sam, "DELETE", ready).status_code == 403
    assert call(alice, "POST", ready, {"hours": 1}, scopes=("read",)).status_code == 403
    assert call(olga, "POST", ready, {"hours": 1}).status_code == 200
    assert ready.events.get(data__action="schedule_removal").kind == "staff_action"


def test_the_policy_binds_members_not_operators(ready, alice, olga, acme) -> None:
    removal_policy_set(customer=acme, default_hours=None, max_hours=10, actor=olga)
    answer = call(alice, "POST", ready, {"hours": 11})
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "over_max_hours")
    assert call(alice, "POST", ready, {"hours": 9}).status_code == 200
    assert call(alice, "DELETE", ready).json()["error"]["code"] == "over_max_hours"
    assert call(olga, "DELETE", ready).status_code == 200


def test_a_rental_without_a_cluster_is_a_conflict(ready, alice) -> None:
    Rental.objects.filter(pk=ready.pk).update(status="terminated")
    answer = call(alice, "POST", ready, {"at": datetime(2100, 1, 1, tzinfo=UTC).isoformat()})
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "no_cluster")
