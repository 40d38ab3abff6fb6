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
