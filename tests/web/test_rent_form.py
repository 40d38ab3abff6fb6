"""Bad input on the rent form is refused with a message that says what to fix, and no rental row."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.admin import CustomerForm
from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator
from tests.matching import must_search

pytestmark = pytest.mark.django_db


def form_data(client: Client, fabric_id: str, **overrides: object) -> dict[str, object]:
    html = client.get("/rent/", {"fabric": fabric_id, "cheapest": "2"}).content.decode()
    data: dict[str, object] = {
        "fabric": fabric_id,
        "customer": must_search(r'name="customer"[^>]*>\s*<option value="([^"]+)"', html).group(1),
        "submit_token": must_search(r'name="submit_token" value="([^"]+)"', html).group(1),
        "template_id": must_search(r'<option value="([^"]+)" selected>', html).group(1),
        "executor_ids": re.findall(r'name="executor_ids" value="([^"]+)"[^>]*checked', html),
        "pod_name": "train-1",
        "ssh_public_keys": SSH_KEY,
    }
    data.update(overrides)
    return data


def post(client: Client, fabric_id: str, **overrides: object) -> str:
    response = client.post(f"/rent/?fabric={fabric_id}", form_data(client, fabric_id, **overrides))
    assert response.status_code == 200, "the form is shown again, not redirected"
    return response.content.decode()


@pytest.fixture
def offers(simulator: Simulator) -> list[dict]:
    return simulator.offers()


def test_one_node_is_refused(offers, alice, client_for) -> None:
    client = client_for(alice)
    html = post(client, offers[0]["fabric_id"], executor_ids=[offers[0]["nodes"][0]["id"]])
    assert "A cluster needs at least 2 nodes" in html
    assert not Rental.objects.exists()


def test_nodes_of_two_fabrics_are_refused(offers, alice, client_for) -> None:
    client = client_for(alice)
    mixed = [offers[0]["nodes"][0]["id"], offers[1]["nodes"][0]["id"]]
    html = post(client, offers[0]["fabric_id"], executor_ids=mixed)
    assert "must be on one fabric" in html
    assert not Rental.objects.exists()


def test_the_same_node_twice_is_refused(offers, alice, client_for) -> None:
    client = client_for(alice)
    node = offers[0]["nodes"][0]["id"]
    html = post(client, offers[0]["fabric_id"], executor_ids=[node, node])
    assert "selected twice" in html
    assert not Rental.objects.exists()


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("ssh-ed25519", "An SSH public key looks like"),
        ("ssh-ed25519 not-base64!!", "not valid base64"),
        ("-----BEGIN OPENSSH PRIVATE KEY----- abc", "Paste the .pub file"),
        ("ssh-rsa " + SSH_KEY.split()[1], "the key is damaged"),
    ],
)
def test_a_malformed_ssh_key_is_refused(offers, alice, client_for, key: str, message: str) -> None:
    client = client_for(alice)
    html = post(client, offers[0]["fabric_id"], ssh_public_keys=key)
    assert message in html
    assert "Line 1" in html
    assert not Rental.objects.exists()


def test_an_empty_pod_name_is_refused(offers, alice, client_for) -> None:
    client = client_for(alice)
    html = post(client, offers[0]["fabric_id"], pod_name="")
    assert "This field is required" in html
    html = post(client, offers[0]["fabric_id"], pod_name="Bad Name!")
    assert "Enter a valid pod name" in html
    assert not Rental.objects.exists()


def test_an_operator_customer_ref_with_a_newline_is_refused(offers, olga, acme, client_for) -> None:
    client = client_for(olga)
    html = post(client, offers[0]["fabric_id"], customer_ref="acme\n", customer=acme.pk)
    assert "A customer ref is 1 to 64 characters" in html
    assert not Rental.objects.exists()


def test_a_member_cannot_choose_the_customer_ref(offers, alice, client_for, monkeypatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    client = client_for(alice)
    response = client.post(
        f"/rent/?fabric={offers[0]['fabric_id']}", form_data(client, offers[0]["fabric_id"], customer_ref="globex")
    )
    assert response.status_code == 302
    assert Rental.objects.get().customer_ref == "acme", "a member's rental always carries the customer's ref"


def test_a_customer_ref_with_a_newline_is_refused_in_the_admin(credential) -> None:
    form = CustomerForm(
        data={"name": "Initech", "customer_ref": "ini\ntech", "default_credential": credential.pk, "active": "on"}
    )
    assert not form.is_valid()
    assert "A customer ref is 1 to 64 characters" in str(form.errors["customer_ref"])


def test_a_double_submit_creates_one_rental(offers, alice, client_for, monkeypatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    client = client_for(alice)
    data = form_data(client, offers[0]["fabric_id"])
    first = client.post(f"/rent/?fabric={offers[0]['fabric_id']}", data)
    second = client.post(f"/rent/?fabric={offers[0]['fabric_id']}", data)
    assert first["Location"] == second["Location"]
    assert Rental.objects.count() == 1


def test_a_double_submit_that_still_validates_creates_one_rental(offers, alice, client_for, monkeypatch) -> None:
    # The second click arrives before the first one's nodes left the cached listing: the form validates
    # again, and the form token's unique constraint still answers with the first rental.
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    monkeypatch.setattr("rentals.offers.offers_take", lambda **kwargs: None)
    client = client_for(alice)
    data = form_data(client, offers[0]["fabric_id"])
    first = client.post(f"/rent/?fabric={offers[0]['fabric_id']}", data)
    second = client.post(f"/rent/?fabric={offers[0]['fabric_id']}", data)
    assert first.status_code == second.status_code == 302
    assert first["Location"] == second["Location"]
    assert Rental.objects.count() == 1


def test_a_member_cannot_order_for_another_customer(offers, alice, globex, client_for) -> None:
    client = client_for(alice)
    html = post(client, offers[0]["fabric_id"], customer=str(globex.pk))
    assert "Select a valid choice" in html
    assert not Rental.objects.exists()


def test_a_partly_rented_node_is_refused_and_never_picked_as_cheapest(offers, alice, client_for) -> None:
    fabric, split = next(
        (offer, node)
        for offer in offers
        for node in offer["nodes"]
        if node.get("available_gpu_count") is not None and int(node["available_gpu_count"]) < int(node["gpu_count"])
    )
    client = client_for(alice)
    whole = next(node["id"] for node in fabric["nodes"] if node["id"] != split["id"])
    html = post(client, fabric["fabric_id"], executor_ids=[whole, split["id"]])
    assert "partly rented; a cluster takes whole nodes only" in html
    picked = form_data(client, fabric["fabric_id"])["executor_ids"]
    assert isinstance(picked, list)
    assert split["id"] not in picked and len(picked) == 2
    assert not Rental.objects.exists()
