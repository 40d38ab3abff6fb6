"""The rent summary's estimated time to ready: the slowest chosen node's, with Lium's warning and "slow machine",
read with the customer's credential, reused briefly, and never in the way of the form when Lium does not answer."""

from __future__ import annotations

import pytest

from rentals.models import Rental
from tests.conftest import Simulator
from tests.web.test_rent_form import form_data

pytestmark = pytest.mark.django_db


def summary(client, fabric_id: str, nodes: list[str]) -> str:  # type: ignore[no-untyped-def]
    response = client.get("/rent/summary/", {"fabric": fabric_id, "executor_ids": nodes})
    assert response.status_code == 200
    return response.content.decode()


def mark_slow(simulator: Simulator, nodes: list[str], extra_seconds: float, warning: str) -> None:
    body = {"executor_ids": nodes, "extra_seconds": extra_seconds, "warning_message": warning}
    simulator.http.post("/_sim/slow-executors", json=body).raise_for_status()


def test_the_summary_shows_the_slowest_nodes_estimate_with_lium_s_warning(simulator: Simulator, alice, client_for):
    offer = simulator.offers()[0]
    slow, fast = (node["id"] for node in offer["nodes"][:2])
    mark_slow(simulator, [slow], 179, "Image pulls are slow on this host")
    client = client_for(alice)
    html = summary(client, offer["fabric_id"], [fast])
    assert "Estimated time to ready: <strong>~1 s</strong>" in html
    assert "slow machine" not in html
    html = summary(client, offer["fabric_id"], [fast, slow])
    assert "Estimated time to ready: <strong>~3 min</strong>" in html  # 180 s: the slow node's
    assert "slow machine" in html
    assert "Lium warns: Image pulls are slow on this host" in html


def test_estimates_are_reused_per_node_for_a_while(simulator: Simulator, alice, client_for) -> None:
    offer = simulator.offers()[0]
    nodes = [node["id"] for node in offer["nodes"][:3]]
    client = client_for(alice)
    summary(client, offer["fabric_id"], nodes[:2])
    summary(client, offer["fabric_id"], nodes[:2])
    summary(client, offer["fabric_id"], nodes)
    asked = [entry["path"] for entry in simulator.requests("estimate")]
    assert len(asked) == 3, "each node is asked about once"


def test_lium_failing_the_estimate_leaves_the_form_working(simulator: Simulator, alice, client_for, no_enqueue):
    simulator.faults([{"fault": "error_before_commit", "route": "estimate", "probability": 1.0}])
    offer = simulator.offers()[0]
    client = client_for(alice)
    html = summary(client, offer["fabric_id"], [node["id"] for node in offer["nodes"][:2]])
    assert "2 nodes" in html and "/hour" in html
    assert "Estimated time to ready: unknown" in html
    page = client.get("/rent/", {"fabric": offer["fabric_id"], "cheapest": "2"})
    assert page.status_code == 200 and "Estimated time to ready: unknown" in page.content.decode()
    assert client.post(f"/rent/?fabric={offer['fabric_id']}", form_data(client, offer["fabric_id"])).status_code == 302
    assert Rental.objects.get().estimated_ready_seconds is None


def test_lium_not_answering_in_time_leaves_the_estimate_unknown(simulator: Simulator, alice, client_for, settings):
    settings.LIUM_ESTIMATE_TIMEOUT_SECONDS = 0.3
    simulator.faults([{"fault": "latency", "route": "estimate", "probability": 1.0, "ms": 3000}])
    offer = simulator.offers()[0]
    html = summary(client_for(alice), offer["fabric_id"], [node["id"] for node in offer["nodes"][:2]])
    assert "2 nodes" in html
    assert "Estimated time to ready: unknown" in html


def test_the_estimate_follows_the_chosen_template(simulator: Simulator, alice, client_for) -> None:
    offer = simulator.offers()[0]
    nodes = [node["id"] for node in offer["nodes"][:2]]
    templates = simulator.http.get("/api/templates", headers={"X-API-Key": "sim-demo-key"}).json()
    cluster = [t["id"] for t in templates if t["docker_image"] == "daturaai/lium-cluster"]
    client = client_for(alice)
    for template_id in cluster[:2]:
        client.get("/rent/summary/", {"fabric": offer["fabric_id"], "executor_ids": nodes, "template_id": template_id})
    assert len(simulator.requests("estimate")) == 4, "two nodes for each of two templates"


def test_the_order_records_the_estimate_it_was_shown(simulator: Simulator, alice, client_for, no_enqueue) -> None:
    offer = simulator.offers()[0]
    client = client_for(alice)
    data = form_data(client, offer["fabric_id"])
    mark_slow(simulator, data["executor_ids"][:1], 41, "Slow")  # type: ignore[index]
    assert client.post(f"/rent/?fabric={offer['fabric_id']}", data).status_code == 302
    # The page already read (and cached) the estimates before the node was marked slow: the order keeps those.
    assert Rental.objects.get().estimated_ready_seconds == 1


@pytest.fixture
def no_enqueue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)


def test_a_starting_member_shows_its_phase_and_estimate_on_the_rental_page(rental, alice, client_for) -> None:  # type: ignore[no-untyped-def]
    from rentals.models import ClusterMember

    Rental.objects.filter(pk=rental.pk).update(status="rented", estimated_ready_seconds=120, cluster_id="cl-1")
    ClusterMember.objects.create(
        rental=rental, pod_id="p1", rank=0, status="PENDING", phase="pulling image", eta_seconds=18
    )
    ClusterMember.objects.create(rental=rental, pod_id="p2", rank=1, status="RUNNING", phase="", eta_seconds=None)
    html = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    cells = [cell.strip() for cell in html.split('data-testid="member-progress">')[1:]]
    assert cells[0].startswith("est. ready in ~18 s (phase: pulling image)</td>")
    assert cells[1].startswith("—</td>")
    assert "Lium estimated ~2 min at the order" in html
