"""The chaos run's verdict (scripts/chaos.py's audit) and its simulator set-up (scripts/harness.py).

The audit is what turns a run into "all zeros" or a failure, so it is tested on hand-made ledgers,
request logs and pod lists; the simulator set-up is tested against a fake control route.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from scripts import harness

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
_spec = importlib.util.spec_from_file_location("chaos_script", SCRIPTS / "chaos.py")
assert _spec is not None and _spec.loader is not None
chaos = importlib.util.module_from_spec(_spec)
sys.modules["chaos_script"] = chaos  # dataclasses look their module up while the class is made
_spec.loader.exec_module(chaos)

RentalView = chaos.RentalView
audit = chaos.audit


def rental(pk: int, status: str, *, cluster_id: str = ""):  # a chaos.RentalView: a run-time type, so not annotated
    return RentalView(
        pk=pk, pod_name=f"chaos-{pk:04d}", idempotency_key=f"key-{pk}", status=status, cluster_id=cluster_id
    )


def committed(pk: int, cluster_id: str) -> dict:
    return {"idempotency_key": f"key-{pk}", "pod_name": f"chaos-{pk:04d}", "cluster_id": cluster_id}


def rent_call(pk: int, body: str = "b1") -> dict:
    return {"route": "rent", "idempotency_key": f"key-{pk}", "body_sha256": body}


def pod(cluster_id: str, status: str = "RUNNING") -> dict:
    return {"id": f"pod-{cluster_id}-{status}", "cluster_id": cluster_id, "status": status}


def test_terminated_while_its_pods_still_run_is_untruthful():
    found = audit([rental(1, "terminated", cluster_id="c1")], [committed(1, "c1")], [], [pod("c1")])

    assert found.count("untruthful") == 1
    assert "still lists 1 live pod" in found.problems["untruthful"][0][1]


def test_terminated_with_its_pods_gone_or_deleting_is_truthful():
    found = audit(
        [rental(1, "terminated", cluster_id="c1"), rental(2, "terminated", cluster_id="c2")],
        [committed(1, "c1"), committed(2, "c2")],
        [],
        [pod("c2", "DELETING")],
    )

    assert found.count("untruthful") == 0


def test_ready_without_a_live_pod_is_untruthful_but_only_when_the_pods_were_read():
    views = [rental(1, "ready", cluster_id="c1")]

    assert audit(views, [committed(1, "c1")], [], []).count("untruthful") == 1
    assert audit(views, [committed(1, "c1")], [], None).count("untruthful") == 0


def test_nothing_rented_with_a_cluster_in_the_ledger_is_untruthful():
    found = audit([rental(1, "not_rented"), rental(2, "refused")], [committed(1, "c1")], [], [])

    assert [subject.pk for subject, _ in found.problems["untruthful"]] == [1]


def test_unknown_counts_as_unknown_with_cluster_only_when_the_ledger_has_one():
    found = audit([rental(1, "unknown"), rental(2, "unknown")], [committed(1, "c1")], [], [pod("c1")])

    assert [r.pk for r in found.unknown_with_cluster] == [1]
    assert found.count("untruthful") == 0


def test_a_key_that_rented_twice_is_a_duplicate():
    found = audit([rental(1, "ready", cluster_id="c1")], [committed(1, "c1"), committed(1, "c2")], [], None)

    assert found.count("duplicates") == 1


def test_delete_calls_are_counted_per_rental_from_the_logged_delete_calls():
    deletes = [
        {"route": "delete", "method": "DELETE", "path": "/api/clusters/c1"},
        {"route": "delete", "method": "DELETE", "path": "/clusters/c1"},
        {"route": "delete", "method": "DELETE", "path": "/api/clusters/c2"},
    ]
    views = [rental(1, "terminated", cluster_id="c1"), rental(2, "terminated", cluster_id="c2")]

    found = audit(views, [committed(1, "c1"), committed(2, "c2")], [rent_call(1)], [], deletes)

    assert found.delete_calls_max_per_rental == 2
    assert found.rent_calls == 1


def test_no_delete_calls_logged_is_zero_and_no_log_at_all_is_not_known():
    views = [rental(1, "ready", cluster_id="c1")]

    assert audit(views, [committed(1, "c1")], [], None, []).delete_calls_max_per_rental == 0
    assert audit(views, [committed(1, "c1")], [], None, None).delete_calls_max_per_rental is None


def test_key_reuse_looks_only_at_rent_calls():
    log = [rent_call(1, "b1"), rent_call(1, "b1"), {"route": "pods", "idempotency_key": "key-1", "body_sha256": "x"}]
    assert audit([rental(1, "rented", cluster_id="c1")], [committed(1, "c1")], log, None).count("key_reused") == 0

    log.append(rent_call(1, "b2"))
    assert audit([rental(1, "rented", cluster_id="c1")], [committed(1, "c1")], log, None).count("key_reused") == 1


def test_set_faults_leaves_out_the_faults_the_simulator_does_not_know():
    posted: list[dict] = []

    def control(request: httpx.Request) -> httpx.Response:
        spec = json.loads(request.content)
        posted.append(spec)
        for rule in spec["rules"]:
            if rule["fault"] == "html_2xx":
                error = {"code": "invalid_faults", "message": "unknown fault 'html_2xx'; known: [...]"}
                return httpx.Response(422, json={"success": False, "error": error})
        return httpx.Response(200, json=spec)

    sim = harness.Simulator(
        harness.Processes(Path("unused")),  # starts nothing: only the control route is asked
        name="simulator",
        seed=1,
        fabrics=1,
        nodes_per_fabric=1,
        faults={},
        env={},  # type: ignore[arg-type]
    )
    sim.control = httpx.Client(base_url="http://sim.invalid", transport=httpx.MockTransport(control))
    rules = [{"fault": "latency", "probability": 0.1}, {"fault": "html_2xx", "probability": 0.1, "commit": True}]

    refused = sim.set_faults({"seed": 3, "rules": rules})

    assert list(refused) == ["html_2xx"]
    assert "unknown fault 'html_2xx'" in refused["html_2xx"]
    assert posted[-1] == {"seed": 3, "rules": [{"fault": "latency", "probability": 0.1}]}


class FakeRental:
    def __init__(self, sent_seconds_ago: float) -> None:
        from datetime import timedelta

        from django.utils import timezone

        self.pk = 1
        self.last_sent_at = timezone.now() - timedelta(seconds=sent_seconds_ago)


def operator_confirming(monkeypatch, finding) -> tuple[Any, list]:
    """Return an operator whose reconcile finds `finding`, and the list its confirmations land in."""
    import random

    from ops import selectors, services

    confirmed: list = []
    monkeypatch.setattr(services, "ops_reconcile", lambda **kwargs: "said")
    monkeypatch.setattr(selectors, "latest_finding", lambda **kwargs: finding)

    def confirm(**kwargs: Any) -> bool:
        confirmed.append(kwargs["cluster_id"])
        return True

    monkeypatch.setattr(services, "ops_confirm_reconciliation", confirm)
    operator = chaos.Operator(user=None, customers=[], rng=random.Random(1), every=0, terminate_share=0)
    return operator, confirmed


def finding(result: str, cluster_ids: list[str]):
    """A reconciliation event on the timeline, as the ops page reads it."""
    from types import SimpleNamespace

    return SimpleNamespace(data={"result": result, "cluster_ids": cluster_ids})


def test_the_operator_confirms_not_rented_only_once_the_last_send_is_quiet(monkeypatch):
    operator, confirmed = operator_confirming(monkeypatch, finding("no_match", []))

    operator.reconcile(FakeRental(sent_seconds_ago=5))
    assert confirmed == []

    operator.reconcile(FakeRental(sent_seconds_ago=30))
    assert confirmed == [None]


def test_the_operator_confirms_a_single_match_and_leaves_an_ambiguous_one(monkeypatch):
    operator, confirmed = operator_confirming(monkeypatch, finding("match", ["c1"]))
    operator.reconcile(FakeRental(sent_seconds_ago=1))
    assert confirmed == ["c1"]

    operator, confirmed = operator_confirming(monkeypatch, finding("ambiguous", ["c1", "c2"]))
    operator.reconcile(FakeRental(sent_seconds_ago=60))
    assert confirmed == []


def test_an_upstream_error_is_expected_but_any_other_exception_is_reported(monkeypatch):
    from ops import services
    from rentals import upstream

    operator, _ = operator_confirming(monkeypatch, None)

    def lying_listing(**kwargs):
        raise upstream.UpstreamUnavailable("the pod listing is not a list")

    monkeypatch.setattr(services, "ops_reconcile", lying_listing)
    operator.reconcile(FakeRental(sent_seconds_ago=60))
    assert operator.counts["reconcile upstream error"] == 1
    assert operator.unexpected == []

    monkeypatch.setattr(services, "ops_reconcile", lambda **kwargs: 1 / 0)
    operator.reconcile(FakeRental(sent_seconds_ago=60))
    assert operator.unexpected == ["reconcile: ZeroDivisionError: division by zero"]


# --- Customers sharing one account: pod names repeat, clusters must not ---------------------------------


def shared(pk: int, status: str, name: str, *, cluster_id: str = "", pod_ids: tuple = (), executors: tuple = ()):
    """A rental of the shared-account profile: its pod name is one of a few, shared with other rentals."""
    return RentalView(
        pk=pk,
        pod_name=name,
        idempotency_key=f"key-{pk}",
        status=status,
        cluster_id=cluster_id,
        pod_ids=pod_ids,
        executor_ids=executors,
    )


def rented(pk: int, name: str, cluster_id: str, pod_ids: list[str], executors: list[str] | None = None) -> dict:
    return {
        "idempotency_key": f"key-{pk}",
        "pod_name": name,
        "cluster_id": cluster_id,
        "pod_ids": pod_ids,
        "executor_uuids": executors or [],
    }


def test_rentals_sharing_a_pod_name_are_judged_by_their_own_keys_not_as_duplicates():
    views = [
        shared(1, "ready", "train-1", cluster_id="c1"),
        shared(2, "ready", "train-1", cluster_id="c2"),
        shared(3, "refused", "train-1"),
    ]
    ledger = [rented(1, "train-1", "c1", ["p1"]), rented(2, "train-1", "c2", ["p2"])]

    found = audit(views, ledger, [], None)

    assert found.count("duplicates") == 0
    assert found.count("untruthful") == 0
    assert found.count("clusters_claimed_twice") == 0
    assert found.count("cross_tenant") == 0


def test_a_rental_holding_the_cluster_another_rental_rented_is_cross_tenant_and_the_cluster_claimed_twice():
    # Acme's order (1) rented nothing; its reconciliation adopted Globex's cluster (2) of the same pod name.
    views = [
        shared(1, "ready", "train-1", cluster_id="c2", pod_ids=("p2a", "p2b")),
        shared(2, "ready", "train-1", cluster_id="c2", pod_ids=("p2a", "p2b")),
    ]
    ledger = [rented(2, "train-1", "c2", ["p2a", "p2b"])]

    found = audit(views, ledger, [], None)

    assert [r.pk for r, _ in found.problems["cross_tenant"]] == [1]
    assert "rental 2" in found.problems["cross_tenant"][0][1]
    # One cluster held twice: its pods are the same finding, not two more.
    assert found.count("clusters_claimed_twice") == 1
    assert "c2" in found.problems["clusters_claimed_twice"][0][1]


def test_a_pod_row_copied_onto_a_second_rental_is_claimed_twice_and_cross_tenant():
    views = [
        shared(1, "rented", "train-2", cluster_id="", pod_ids=("p2a",)),
        shared(2, "ready", "train-2", cluster_id="c2", pod_ids=("p2a", "p2b")),
    ]
    ledger = [rented(1, "train-2", "c1", ["p1a"]), rented(2, "train-2", "c2", ["p2a", "p2b"])]

    found = audit(views, ledger, [], None)

    assert found.count("clusters_claimed_twice") == 1
    assert "pod p2a" in found.problems["clusters_claimed_twice"][0][1]
    assert [r.pk for r, _ in found.problems["cross_tenant"]] == [1]


def test_a_cluster_the_ledger_has_under_no_rental_of_the_run_is_foreign_not_cross_tenant():
    views = [shared(1, "rented", "train-3", cluster_id="c9"), shared(2, "refused", "train-3")]
    ledger = [rented(1, "train-3", "c1", ["p1"]), rented(99, "train-3", "c9", ["p9"])]

    found = audit(views, ledger, [], None)

    assert found.count("cross_tenant") == 0
    assert len(found.foreign) == 1  # a shared pod name does not account for another key's cluster
    assert found.count("untruthful") == 1


def test_an_unknown_rental_with_a_cluster_is_unrivalled_unless_another_rental_ordered_the_same_name_and_nodes():
    views = [
        shared(1, "unknown", "train-1", executors=("n1", "n2")),
        shared(2, "unknown", "train-1", executors=("n2", "n1")),
        shared(3, "unknown", "train-2", executors=("n5", "n6")),
        shared(4, "refused", "train-1", executors=("n5", "n6")),
    ]
    ledger = [rented(1, "train-1", "c1", ["p1"]), rented(3, "train-2", "c3", ["p3"])]

    found = audit(views, ledger, [], None)

    assert sorted(r.pk for r in found.unknown_with_cluster) == [1, 3]
    assert [r.pk for r in found.unknown_unrivalled] == [3]


def contested_offers(listing: list[dict], *, waiting: set[str], hold: float) -> harness.ContestedOffers:
    """Offers over a fake listing route, as the shared-account profile picks nodes."""
    import random

    offers = harness.ContestedOffers(
        "http://sim.invalid", random.Random(1), fabrics=2, hold=hold, waiting=lambda: waiting
    )
    offers.http = httpx.Client(
        base_url="http://sim.invalid", transport=httpx.MockTransport(lambda request: httpx.Response(200, json=listing))
    )
    return offers


def node(node_id: str) -> dict:
    return {"id": node_id, "gpu_count": 8, "available_gpu_count": 8}


def test_every_customer_is_offered_the_first_free_nodes_of_the_same_fabrics_unless_an_order_waits_on_them():
    listing = [
        {"fabric_id": "f1", "nodes": [node("a1"), node("a2"), node("a3")]},
        {"fabric_id": "f2", "nodes": [node("b1"), node("b2"), node("b3")]},
        {"fabric_id": "f3", "nodes": [node("c1"), node("c2"), node("c3")]},  # not one of the two contested
    ]
    waiting: set[str] = set()
    offers = contested_offers(listing, waiting=waiting, hold=0)

    picked = [pick for _ in range(20) if (pick := offers.pick(2)) is not None]
    # Two customers in a row get the same nodes while the listing shows them free: they compete for them.
    assert {(fabric, tuple(n["id"] for n in nodes)) for fabric, nodes in picked} == {
        ("f1", ("a1", "a2")),
        ("f2", ("b1", "b2")),
    }

    waiting.update({"a1", "b2"})  # orders on these nodes have not been sent yet
    picked = [pick for _ in range(20) if (pick := offers.pick(2)) is not None]
    assert {(fabric, tuple(n["id"] for n in nodes)) for fabric, nodes in picked} == {
        ("f1", ("a2", "a3")),
        ("f2", ("b1", "b3")),
    }
    assert offers.pick(3) is None  # no contested fabric has 3 nodes free of waiting orders
