"""End to end: browser-side requests → Django → database → broker → a real Celery worker → the simulator
over HTTP → back to the page through the polled fragment."""

from __future__ import annotations

import re
import time

import pytest
from django.test import Client

from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator
from tests.matching import must_search

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def cheapest_pair_form(client: Client, fabric_id: str) -> dict[str, object]:
    """Open the rent page as a user would (\"pick the 2 cheapest\") and return the form's data."""
    page = client.get("/rent/", {"fabric": fabric_id, "cheapest": "2"})
    assert page.status_code == 200
    html = page.content.decode()
    nodes = re.findall(r'name="executor_ids" value="([^"]+)"[^>]*checked', html)
    assert len(nodes) == 2
    return {
        "fabric": fabric_id,
        "customer": must_search(r'name="customer"[^>]*>\s*<option value="([^"]+)"', html).group(1),
        "submit_token": must_search(r'name="submit_token" value="([^"]+)"', html).group(1),
        "template_id": must_search(r'<option value="([^"]+)" selected>', html).group(1),
        "executor_ids": nodes,
        "pod_name": "train-e2e",
        "ssh_public_keys": SSH_KEY,
        "enable_volume_encryption": "on",
        "enable_backups": "on",
    }


def poll_until(client: Client, url: str, statuses: set[str], timeout: float = 45.0) -> str:
    """Follow the progress fragment as htmx would, until its status is one of `statuses`."""
    deadline = time.monotonic() + timeout
    html = ""
    while time.monotonic() < deadline:
        html = client.get(url, headers={"HX-Request": "true"}).content.decode()
        status = must_search(r'data-status="([^"]+)"', html).group(1)
        if status in statuses:
            return html
        time.sleep(0.3)
    raise AssertionError(f"status never reached {statuses}; last fragment:\n{html}")


def test_alice_rents_a_two_node_cluster_and_watches_it_become_ready(
    simulator: Simulator, celery_worker_process, alice, client_for
) -> None:
    client = client_for(alice)
    fabrics = client.get("/fabrics/").content.decode()
    fabric_id = simulator.offers()[0]["fabric_id"]
    assert "NVIDIA" in fabrics and "Choose nodes" in fabrics

    response = client.post(f"/rent/?fabric={fabric_id}", cheapest_pair_form(client, fabric_id))
    assert response.status_code == 302
    rental = Rental.objects.get()
    detail_url = response["Location"]
    assert detail_url == f"/rentals/{rental.public_id}/"

    html = poll_until(client, f"{detail_url}progress/", {"ready"})
    assert html.count('<td class="mono">10.42.0.') == 2, "both members are listed with their overlay IPs"
    assert html.count("ssh root@") == 2
    gpus = rental.gpus_per_node
    assert f"10.42.0.1 slots={gpus}\n10.42.0.2 slots={gpus}</pre>" in html, "a ready-to-paste hostfile"
    assert "MASTER_ADDR=10.42.0.1" in html
    assert "--nnodes 2" in html and "--master_addr 10.42.0.1" in html
    assert "hx-get" not in html or "delay:15" in html, "a ready rental polls slowly"
    page = client.get(detail_url).content.decode()
    assert "acme" in page, "the customer ref is shown"

    ledger = simulator.ledger()
    assert len(ledger) == 1
    assert ledger[0]["idempotency_key"] == str(rental.idempotency_key)
    assert ledger[0]["customer_ref"] == "acme"
    assert ledger[0]["body_sha256"] == rental.body_sha256


def test_bob_cannot_see_alices_rental(simulator: Simulator, celery_worker_process, alice, bob, client_for) -> None:
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    detail_url = client.post(f"/rent/?fabric={fabric_id}", cheapest_pair_form(client, fabric_id))["Location"]
    client.logout()
    client = client_for(bob)
    assert client.get(detail_url).status_code == 404
    assert client.get(f"{detail_url}progress/").status_code == 404


def test_an_answer_lost_after_the_commit_ends_rented_with_a_replay_shown(
    simulator: Simulator, celery_worker_process, alice, client_for
) -> None:
    simulator.faults([{"fault": "drop_after_commit", "next": 1}])
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    detail_url = client.post(f"/rent/?fabric={fabric_id}", cheapest_pair_form(client, fabric_id))["Location"]

    html = poll_until(client, f"{detail_url}progress/", {"rented", "ready"})
    assert "replayed answer" in html
    rental = Rental.objects.get()
    sent = [r for r in simulator.requests() if r["idempotency_key"] == str(rental.idempotency_key)]
    assert len(sent) >= 2, "the lost answer was followed by a repeat"
    assert {r["body_sha256"] for r in sent} == {rental.body_sha256}, "every attempt sent the same bytes"
    assert len(simulator.ledger()) == 1, "the repeat did not rent a second cluster"
