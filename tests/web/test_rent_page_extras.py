"""The rent page's helpers: saved SSH keys, the live order summary, and the customer's spend cap."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounts.models import SshPublicKey
from billing.models import CustomerQuota
from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator
from tests.web.test_rent_form import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_enqueue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)


def test_a_saved_key_is_offered_and_used_without_pasting(simulator: Simulator, alice, client_for, no_enqueue):
    client = client_for(alice)
    response = client.post("/profile/ssh-keys/", {"name": "laptop", "public_key": SSH_KEY})
    assert response.status_code == 302
    key = SshPublicKey.objects.get(user=alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    page = client.get("/rent/", {"fabric": fabric_id}).content.decode()
    assert "laptop" in page
    data = form_data(client, fabric_id, ssh_public_keys="", saved_keys=[key.pk])
    assert client.post(f"/rent/?fabric={fabric_id}", data).status_code == 302
    assert SSH_KEY.split()[1].encode() in bytes(Rental.objects.get().request_body)


def test_a_bad_saved_key_is_refused_with_the_reason(alice, client_for) -> None:
    client = client_for(alice)
    html = client.post("/profile/ssh-keys/", {"name": "bad", "public_key": "hello"}).content.decode()
    assert "An SSH public key looks like" in html
    assert not SshPublicKey.objects.exists()


def test_bob_cannot_delete_alices_key(alice, bob, client_for) -> None:
    key = SshPublicKey.objects.create(user=alice, name="laptop", public_key=SSH_KEY)
    assert client_for(bob).post(f"/profile/ssh-keys/{key.pk}/delete/").status_code == 404
    assert SshPublicKey.objects.filter(pk=key.pk).exists()


def test_the_summary_adds_up_the_selected_nodes(simulator: Simulator, alice, client_for) -> None:
    offer = simulator.offers()[0]
    nodes = offer["nodes"][:3]
    per_hour = sum(Decimal(str(n["price_per_gpu"])) * int(n["gpu_count"]) for n in nodes)
    html = (
        client_for(alice)
        .get("/rent/summary/", {"fabric": offer["fabric_id"], "executor_ids": [n["id"] for n in nodes]})
        .content.decode()
    )
    assert "3 nodes" in html
    assert f"{sum(int(n['gpu_count']) for n in nodes)} GPUs" in html
    assert f"${per_hour:.2f}/hour" in html
    assert f"${per_hour * 24:.2f}/day" in html


def test_an_order_above_the_hourly_quota_is_refused_naming_quota_and_spend(
    simulator: Simulator, alice, acme, client_for, no_enqueue
) -> None:
    CustomerQuota.objects.create(customer=acme, max_hourly_usd=Decimal("1.00"))
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    html = client.post(f"/rent/?fabric={fabric_id}", form_data(client, fabric_id)).content.decode()
    assert "Quota of USD per hour reached" in html
    assert "$0.00 in use, above its quota of $1.00 USD per hour" in html
    assert not Rental.objects.exists()


REPLAY_TEXT = "Lium answered with the stored result of the first request (a replay): nothing was rented twice."


def test_a_replayed_answer_is_explained_in_visible_text(rental, alice, client_for) -> None:  # type: ignore[no-untyped-def]
    Rental.objects.filter(pk=rental.pk).update(replayed=True, status="rented")
    html = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    assert f">{REPLAY_TEXT}<" in html, "said in the page's text, not only in a tooltip"


def test_an_answer_that_was_not_replayed_says_nothing_about_replays(rental, alice, client_for) -> None:  # type: ignore[no-untyped-def]
    html = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    assert REPLAY_TEXT not in html
