"""`POST /api/v1/rentals/{id}/members/{rank}/reboot` and `/reset-gpu`: 202 with what was asked, scope `manage`,
support 403, other customers 404, clear errors for a bad rank, a member not running or a reset too soon."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.orders.order import RentOrder
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


def call(user, rental: Rental, path: str, body: object = "", scopes=("read", "manage"), headers=None):  # type: ignore[no-untyped-def]
    _key, secret = api_key_create(user=user, name="k", scopes=list(scopes))
    data = body if isinstance(body, str) else json.dumps(body)
    return Client().post(
        f"/api/v1/rentals/{rental.public_id}/members/{path}",
        data,
        content_type="application/json",
        headers={"X-API-Key": secret, **(headers or {})},
    )


def test_a_reboot_answers_202_with_what_was_asked(ready, alice) -> None:
    response = call(alice, ready, "1/reboot", {"reason": "stuck"})
    assert response.status_code == 202, response.content
    body = response.json()
    assert {key: body[key] for key in ("rank", "pod_id", "action", "status", "reason", "asked_by", "replayed")} == {
        "rank": 1,
        "pod_id": "pod-1",
        "action": "reboot",
        "status": "asked",
        "reason": "stuck",
        "asked_by": "alice",
        "replayed": False,
    }
    assert RentalEvent.objects.filter(data__repair="reboot", actor=alice).count() == 1


def test_the_same_idempotency_key_is_the_same_click(ready, alice) -> None:
    first = call(alice, ready, "0/reset-gpu", headers={"Idempotency-Key": "click-1"})
    again = call(alice, ready, "0/reset-gpu", headers={"Idempotency-Key": "click-1"})
    assert (first.status_code, again.status_code, again.json()["replayed"]) == (202, 202, True)
    assert RentalEvent.objects.filter(data__repair="reset_gpu").count() == 1
    other = call(alice, ready, "0/reset-gpu", headers={"Idempotency-Key": "click-2"})
    assert other.status_code == 409 and other.json()["error"]["code"] == "repair_in_progress"


def test_who_may(ready, bob, sam, olga, alice) -> None:
    assert call(bob, ready, "1/reboot").status_code == 404
    assert call(sam, ready, "1/reboot").status_code == 403
    assert call(alice, ready, "1/reboot", scopes=("read",)).status_code == 403
    assert call(olga, ready, "1/reboot").status_code == 202


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("9/reboot", 422, "invalid_rank"),
        ("x/reboot", 422, "invalid_rank"),
        ("1/reset-gpu", 409, "member_not_running"),
    ],
)
def test_bad_input_gets_a_clear_error(ready, alice, path: str, status: int, code: str) -> None:
    ClusterMember.objects.filter(rental=ready, rank=1).update(status="REBOOT_PENDING")
    response = call(alice, ready, path)
    assert response.status_code == status and response.json()["error"]["code"] == code
    assert response.json()["message"]


def test_a_bad_body_is_refused(ready, alice) -> None:
    assert call(alice, ready, "1/reboot", {"reason": 5}).status_code == 422
    assert call(alice, ready, "1/reboot", {"gpu": 1}).status_code == 422
    assert call(alice, ready, "1/reboot", "[1]").status_code == 400


def test_a_reset_within_lium_s_minute_answers_429_with_retry_after(ready, alice) -> None:
    assert call(alice, ready, "0/reset-gpu").status_code == 202
    event = RentalEvent.objects.get(data__repair="reset_gpu")
    RentalEvent.objects.filter(pk=event.pk).update(
        data={**event.data, "state": "done", "sent_at": timezone.now().isoformat()}
    )
    response = call(alice, ready, "0/reset-gpu")
    assert response.status_code == 429
    assert response.json()["message"].startswith("Lium allows one GPU reset per minute per node; try again in")
    assert 0 < int(response["Retry-After"]) <= 60
