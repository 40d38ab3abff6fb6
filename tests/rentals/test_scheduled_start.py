"""A scheduled start: an order saved for later waits `scheduled`, is sent once at its time (Django's clock moved by
hand), and is refused with the reason when its nodes are gone or a quota no longer allows it; it can be moved or
cancelled until then. Offers are faked (tests/web/offer_fakes.py); enqueues are recorded, not sent."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from api.keys import api_key_create
from billing.quotas import quota_set_by_operator
from rentals.models import Rental
from rentals.orders.scheduled import scheduled_send, scheduled_send_due
from rentals.selectors import customer_hourly_spend
from rentals.upstream import UpstreamError
from tests.conftest import SSH_KEY
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(monkeypatch: pytest.MonkeyPatch) -> list:
    """The free nodes Lium offers now (a test takes some away to play another customer renting them)."""
    free = [node("n-1", "2.00"), node("n-2", "1.50"), node("n-3", "3.00"), node("n-4", "3.00")]
    offer_fakes.install(monkeypatch, lambda credential: list(free))
    return free


@pytest.fixture
def api(alice):  # type: ignore[no-untyped-def]
    key = api_key_create(user=alice, name="k", scopes=["read", "rent", "manage"])[1]

    def post(start_at: str | None, executors: tuple[str, ...] = ("n-1", "n-2")):  # type: ignore[no-untyped-def]
        body = {"fabric_id": FABRIC, "executor_ids": list(executors), "pod_name": "later", "ssh_public_keys": [SSH_KEY]}
        if start_at is not None:
            body["start_at"] = start_at
        return Client().post("/api/v1/rentals", body, content_type="application/json", headers={"X-API-Key": key})

    return post


@pytest.fixture
def scan(django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    """Run beat's scan as its task would, with what it enqueues on commit recorded."""

    def run() -> dict[str, int]:
        with django_capture_on_commit_callbacks(execute=True):
            return scheduled_send_due()

    return run


def sends(enqueued) -> list:  # type: ignore[no-untyped-def]
    return [args for name, args, _countdown in enqueued.calls if name == "rentals.tasks.rental_send"]


def iso(moment) -> str:  # type: ignore[no-untyped-def]
    return moment.isoformat()


def rent_form_fields(html: str, customer_id: int, **fields: object) -> dict:  # type: ignore[type-arg]
    """The rent form as the page `html` offers it (its submit token and default template) for `customer_id`, with
    the test's own `fields` (nodes, pod name, start time, ...)."""
    return {
        "fabric": FABRIC,
        "customer": customer_id,
        "submit_token": re.search(r'name="submit_token" value="([^"]+)"', html).group(1),  # type: ignore[union-attr]
        "template_id": re.search(r'<option value="([^"]+)" selected>', html).group(1),  # type: ignore[union-attr]
        "ssh_public_keys": SSH_KEY,
        **fields,
    }


def test_an_order_for_later_waits_scheduled_and_is_sent_once_at_its_time(
    scan, nodes, api, clock, enqueued, acme
) -> None:
    answer = api(iso(clock.now + timedelta(hours=2)))
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["status"] == "scheduled" and body["start_at"] is not None
    assert sends(enqueued) == [], "nothing is sent before its time"
    assert customer_hourly_spend(customer=acme) == 0, "a scheduled rental bills nothing yet"

    clock.advance(hours=1, minutes=59)
    assert scan() == {"sent": 0, "refused": 0, "waiting": 0}
    clock.advance(minutes=1)
    assert scan() == {"sent": 1, "refused": 0, "waiting": 0}
    rental = Rental.objects.get()
    assert rental.status == "queued"
    assert sends(enqueued) == [(rental.pk,)]
    assert scan()["sent"] == 0, "a second scan finds nothing to send"
    assert sends(enqueued) == [(rental.pk,)]
    assert rental.events.filter(message__startswith="Its start time came").count() == 1


def test_two_senders_of_one_due_rental_send_it_once(
    nodes, api, clock, enqueued, django_capture_on_commit_callbacks
) -> None:
    api(iso(clock.now + timedelta(minutes=5)))
    clock.advance(minutes=5)
    seen_by_one, seen_by_other = Rental.objects.get(), Rental.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        assert scheduled_send(rental=seen_by_one) == "sent"
        assert scheduled_send(rental=seen_by_other) == "waiting"
    assert len(sends(enqueued)) == 1


def test_exact_nodes_gone_by_then_end_refused_with_the_reason(
    scan, nodes, api, clock, enqueued, alice, client_for
) -> None:
    api(iso(clock.now + timedelta(hours=1)))
    del nodes[0]  # n-1 rented by someone else meanwhile
    clock.advance(hours=1)
    assert scan()["refused"] == 1
    rental = Rental.objects.get()
    assert (rental.status, rental.error_code) == ("refused", "scheduled_nodes_gone")
    assert "1 selected node(s) are no longer free on this fabric" in rental.error_message
    assert sends(enqueued) == []
    page = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    assert "Your scheduled order was not sent at its time." in page
    assert "no longer free on this fabric" in page and "Lium said" not in page


def test_a_quota_reached_by_then_refuses_it_by_name(scan, nodes, api, clock, enqueued, acme) -> None:
    quota_set_by_operator(customer=acme, max_gpus=16, max_clusters=None, max_hourly_usd=None)
    assert api(iso(clock.now + timedelta(hours=1))).status_code == 201  # 16 GPUs: within the quota now
    assert api(None, executors=("n-3", "n-4")).status_code == 201  # another 16, sent now (the scheduled one waits)
    clock.advance(hours=1)
    assert scan()["refused"] == 1
    scheduled = Rental.objects.get(start_at__isnull=False)
    assert (scheduled.status, scheduled.error_code) == ("refused", "quota_exceeded")
    assert "Quota of GPUs at once reached" in scheduled.error_message


def test_an_order_for_later_is_checked_against_the_quotas_when_made(nodes, api, clock, acme) -> None:
    quota_set_by_operator(customer=acme, max_gpus=8, max_clusters=None, max_hourly_usd=None)
    refused = api(iso(clock.now + timedelta(hours=1)))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "quota_exceeded"


def test_the_offers_unreadable_at_its_time_keep_it_waiting(scan, nodes, api, clock, enqueued, monkeypatch) -> None:
    api(iso(clock.now + timedelta(hours=1)))
    clock.advance(hours=1)

    def down(**kwargs):  # type: ignore[no-untyped-def]
        raise UpstreamError("Lium is down")

    monkeypatch.setattr("rentals.offers.offers_get", down)
    assert scan()["waiting"] == 1
    assert Rental.objects.get().status == "scheduled"


@pytest.mark.parametrize(
    ("start_at", "message"),
    [
        ("2030-06-01T09:00:00", "with its timezone"),
        ("PAST", "in the future"),
        ("FAR", "at most 30 days ahead"),
        ("9999-12-31T23:59:59-12:00", "at most 30 days ahead"),  # past year 9999 in UTC: too far, not "the past"
        ("0001-01-01T00:00:00+14:00", "in the future"),  # before year 1 in UTC
        ("tomorrow", "datetime"),
    ],
)
def test_the_api_refuses_a_start_time_saying_what_to_fix(nodes, api, clock, start_at, message) -> None:
    moments = {"PAST": iso(clock.now - timedelta(seconds=1)), "FAR": iso(clock.now + timedelta(days=30, seconds=1))}
    answer = api(moments.get(start_at, start_at))
    assert answer.status_code == 422
    [error] = answer.json()["validation_errors"]
    assert error["field"] == "start_at" and message in error["message"]
    assert not Rental.objects.exists()


def test_thirty_days_ahead_is_allowed(nodes, api, clock) -> None:
    assert api(iso(clock.now + timedelta(days=30))).status_code == 201


def test_the_start_can_be_moved_or_the_order_cancelled_until_then(scan, nodes, api, clock, enqueued, alice, client_for):  # type: ignore[no-untyped-def]
    api(iso(clock.now + timedelta(hours=1)))
    rental = Rental.objects.get()
    client = client_for(alice)
    later = (clock.now + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")
    client.post(f"/rentals/{rental.public_id}/reschedule/", {"start_at": later})
    rental.refresh_from_db()
    assert rental.start_at.strftime("%Y-%m-%dT%H:%M") == later  # type: ignore[union-attr]
    clock.advance(hours=1)
    assert scan()["sent"] == 0, "not at the old time"

    past = (clock.now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    page = client.post(f"/rentals/{rental.public_id}/reschedule/", {"start_at": past}, follow=True).content.decode()
    assert "Give a start time in the future." in page

    client.post(f"/rentals/{rental.public_id}/cancel/")
    rental.refresh_from_db()
    assert rental.status == "cancelled"
    clock.advance(hours=5)
    assert scan()["sent"] == 0
    assert sends(enqueued) == []
    tomorrow = (clock.now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    moved = client.post(f"/rentals/{rental.public_id}/reschedule/", {"start_at": tomorrow}, follow=True)
    assert "Too late to change" in moved.content.decode()


def test_support_cannot_move_a_scheduled_start(nodes, api, clock, sam, client_for) -> None:
    api(iso(clock.now + timedelta(hours=1)))
    rental = Rental.objects.get()
    later = (clock.now + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")
    assert client_for(sam).post(f"/rentals/{rental.public_id}/reschedule/", {"start_at": later}).status_code == 403


def test_the_rent_form_schedules_a_start(nodes, clock, enqueued, alice, acme, client_for) -> None:
    client = client_for(alice)
    html = client.get("/rent/", {"fabric": FABRIC}).content.decode()
    start = (clock.now + timedelta(days=1)).replace(second=0)
    form = rent_form_fields(
        html,
        acme.pk,
        executor_ids=["n-1", "n-2"],
        pod_name="tomorrow",
        start_at=start.strftime("%Y-%m-%dT%H:%M"),
    )
    assert 'name="start_at"' in html
    answer = client.post(f"/rent/?fabric={FABRIC}", form)
    assert answer.status_code == 302
    rental = Rental.objects.get()
    assert (rental.status, rental.start_at) == ("scheduled", start)
    page = client.get(answer["Location"]).content.decode()
    assert f"Scheduled to be sent at <strong>{start:%Y-%m-%d %H:%M} UTC</strong>" in page
    assert sends(enqueued) == []


def test_a_rent_form_with_a_tampered_preset_id_says_so_instead_of_failing(nodes, clock, alice, acme, client_for):  # type: ignore[no-untyped-def]
    # The hidden preset_id is stored on a scheduled rental: past the column's range, the database would refuse it.
    client = client_for(alice)
    html = client.get("/rent/", {"fabric": FABRIC}).content.decode()
    form = rent_form_fields(
        html,
        acme.pk,
        executor_ids=["n-1", "n-2"],
        pod_name="tampered",
        start_at=(clock.now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        preset_id=str(10**20),
    )
    answer = client.post(f"/rent/?fabric={FABRIC}", form)
    assert answer.status_code == 200 and "Open the rent form from the preset again" in answer.content.decode()
    assert not Rental.objects.exists()


def test_the_rent_form_refuses_a_start_in_the_past(nodes, clock, alice, acme, client_for) -> None:
    client = client_for(alice)
    html = client.get("/rent/", {"fabric": FABRIC}).content.decode()
    form = rent_form_fields(
        html,
        acme.pk,
        executor_ids=["n-1", "n-2"],
        pod_name="yesterday",
        start_at=(clock.now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
    )
    page = client.post(f"/rent/?fabric={FABRIC}", form).content.decode()
    assert "Give a start time in the future." in page
    assert not Rental.objects.exists()
    assert Decimal(0) == customer_hourly_spend(customer=acme)


# --- From a preset: its cheapest matching nodes are picked again at its time (presets.matching) -------------------


@pytest.fixture
def preset(acme, alice):  # type: ignore[no-untyped-def]
    from presets.models import Preset

    return Preset.objects.create(
        customer=acme,
        created_by=alice,
        name="two h100",
        gpu_type="H100",
        node_count=2,
        pod_name="from-preset",
        ssh_public_keys=SSH_KEY,
    )


def rent_form_from(client, preset, start_at: str) -> dict:  # type: ignore[no-untyped-def]
    """Open the rent form from the preset (its cheapest matching nodes now) and fill in a start time."""
    opened = client.get(f"/presets/{preset.pk}/use/")
    html = client.get(opened["Location"]).content.decode()
    assert f'name="preset_id" value="{preset.pk}"' in html
    return rent_form_fields(
        html,
        preset.customer_id,
        executor_ids=re.findall(r'name="executor_ids" value="([^"]+)"[^>]*checked', html),
        pod_name="from-preset",
        preset_id=preset.pk,
        start_at=start_at,
    )


def test_a_scheduled_preset_picks_the_cheapest_matching_nodes_at_its_time(
    scan, nodes, clock, enqueued, alice, preset, client_for
) -> None:
    client = client_for(alice)
    form = rent_form_from(client, preset, (clock.now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    assert sorted(form["executor_ids"]) == ["n-1", "n-2"], "the two cheapest now"
    assert client.post(f"/rent/?fabric={FABRIC}", form).status_code == 302
    rental = Rental.objects.get()
    assert (rental.status, rental.preset_id) == ("scheduled", preset.pk)
    key = rental.idempotency_key

    del nodes[1]  # n-2 rented by someone else; a cheaper node appears
    nodes.append(node("n-9", "1.00"))
    clock.advance(hours=1)
    assert scan()["sent"] == 1
    rental.refresh_from_db()
    assert rental.status == "queued"
    assert sorted(rental.executor_ids) == ["n-1", "n-9"]
    assert b'"executor_uuids":["n-9","n-1"]' in bytes(rental.request_body)
    assert sorted(rental.nodes.values_list("executor_id", flat=True)) == ["n-1", "n-9"]
    assert rental.price_per_hour == Decimal("24.00")  # 8 GPUs x ($1.00 + $2.00)
    assert rental.idempotency_key == key, "one key per rental, made at submit"
    assert sends(enqueued) == [(rental.pk,)]


def test_a_scheduled_preset_with_nothing_matching_at_its_time_ends_refused(
    scan, nodes, clock, alice, preset, client_for
) -> None:
    client = client_for(alice)
    form = rent_form_from(client, preset, (clock.now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    client.post(f"/rent/?fabric={FABRIC}", form)
    del nodes[:3]  # one H100 node left: the preset asks for two
    clock.advance(hours=1)
    assert scan()["refused"] == 1
    rental = Rental.objects.get()
    assert (rental.status, rental.error_code) == ("refused", "scheduled_no_matching_nodes")
    assert "No fabric offers" in rental.error_message


def test_a_preset_deleted_before_its_time_refuses_it_saying_so(scan, nodes, clock, alice, preset, client_for) -> None:
    client = client_for(alice)
    client.post(
        f"/rent/?fabric={FABRIC}",
        rent_form_from(client, preset, (clock.now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")),
    )
    preset.delete()
    clock.advance(hours=1)
    assert scan()["refused"] == 1
    assert "Its preset was deleted." in Rental.objects.get().error_message


def test_the_api_moves_a_scheduled_start_and_cancels_it(scan, nodes, api, clock, alice, bob, sam) -> None:
    rental_id = api(iso(clock.now + timedelta(hours=1))).json()["id"]

    def call(user, action: str, body: dict | None = None):  # type: ignore[no-untyped-def]
        key = api_key_create(user=user, name=f"k-{action}", scopes=["read", "manage"])[1]
        return Client().post(
            f"/api/v1/rentals/{rental_id}/{action}",
            body or {},
            content_type="application/json",
            headers={"X-API-Key": key},
        )

    moved = call(alice, "start", {"start_at": iso(clock.now + timedelta(hours=5))})
    assert moved.status_code == 200 and moved.json()["start_at"].startswith(
        f"{clock.now + timedelta(hours=5):%Y-%m-%dT%H:%M}"
    )
    naive = call(alice, "start", {"start_at": "2030-06-01T09:00:00"})
    assert (naive.status_code, naive.json()["error"]["code"]) == (422, "invalid_start_at")
    assert "with its timezone" in naive.json()["error"]["message"]
    assert call(bob, "start", {"start_at": iso(clock.now + timedelta(hours=2))}).status_code == 404
    clock.advance(hours=1)
    assert scan()["sent"] == 0, "not at the old time"

    cancelled = call(alice, "cancel")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    assert call(alice, "cancel").status_code == 409
    again = call(alice, "start", {"start_at": iso(clock.now + timedelta(hours=2))})
    assert (again.status_code, again.json()["error"]["code"]) == (409, "not_scheduled")
