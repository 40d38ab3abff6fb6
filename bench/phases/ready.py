"""Phase 8: time to ready, from the submit to the dashboard saying `ready`, against the simulator's start delay.

N clusters are submitted one every `--ready-interval` seconds (as the order service saves them) with the
simulator's pods taking `--ready-start-seconds` from the rent call to RUNNING; one worker (every queue, beat and
so the sweeper) sends them and follows their pods. Printed apart, the dashboard's own share of the wait: submitted
→ sent (our queue and worker) and the ready detection's lag (ready saved minus when the simulator's pods ran: its
receipt of the rent call plus its start delay), which the pod listing's interval bounds.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from bench.context import SSH_KEY, People, Run, Stack
from bench.direct import Direct
from bench.figures import pct, r
from bench.workers import MeasuredWorker
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from scripts.harness import say, wait_until

BENCH_START_SECONDS = 1.0  # the other phases' simulator (scripts.harness.Simulator starts it so)


def measure_ready(run: Run, stack: Stack, people: People, direct: Direct, worker: MeasuredWorker) -> None:
    """Submit the rentals, wait until every one is ready (within the budget), and report the figures."""
    n, delay = run.args.ready_rentals, run.args.ready_start_seconds
    say(f"\n[8] time to ready: {n} clusters, the simulator's pods start {delay:g} s after the rent call")
    refused = stack.sim.set_config({"start_seconds": delay})
    if refused:
        raise RuntimeError(f"the simulator refused start_seconds={delay}: {refused}")
    worker.start(2)
    try:
        ids = submit_paced(run, people, direct.node_pairs(n))
        ready = wait_until(
            lambda: Rental.objects.filter(pk__in=ids, ready_at__isnull=False).count(),
            lambda done: done == len(ids),
            timeout=run.args.ready_budget,
            interval=0.1,
        )
        worker.sample_memory()
    finally:
        stack.sim.set_config({"start_seconds": BENCH_START_SECONDS})
    fields = ("idempotency_key", "created_at", "first_sent_at", "rented_at", "ready_at")
    rows = [dict(row) for row in Rental.objects.filter(pk__in=ids, ready_at__isnull=False).values(*fields)]
    figures = ready_figures(rows, direct.receipts(), delay)
    run.result["ready"] = {"rentals": n, "ready": ready or 0, "start_seconds": delay, **figures}
    report(run, run.result["ready"])


def submit_paced(run: Run, people: People, pairs: list[tuple[str, list[str]]]) -> list[int]:
    """Submit one rental per node pair, one every `--ready-interval` seconds; return their ids."""
    ids = []
    for index, (fabric_id, node_ids) in enumerate(pairs):
        order = RentOrder(
            fabric_id=fabric_id,
            executor_ids=node_ids,
            pod_name=f"ready-{index}",
            public_keys=[SSH_KEY],
            template_id=people.template_id,
        )
        ids.append(rental_submit(user=people.alice, customer=people.customer, customer_ref="bench", order=order).pk)
        time.sleep(run.args.ready_interval)
    return ids


def _seconds(later: datetime | None, earlier: datetime | float | None) -> float | None:
    if later is None or earlier is None:
        return None
    start = earlier if isinstance(earlier, float) else earlier.timestamp()
    return later.timestamp() - start


def ready_figures(rows: list[dict[str, Any]], receipts: dict[str, float], delay: float) -> dict[str, Any]:
    """Return p50/p90/p99 (s) of the time to ready and of each part; the dashboard's share separately."""
    parts: dict[str, list[float]] = {"total": [], "queue": [], "answer": [], "start": [], "detect": []}
    for row in rows:
        receipt = receipts.get(str(row["idempotency_key"]))
        pods_running = receipt + delay if receipt is not None else None
        for name, later, earlier in (
            ("total", row["ready_at"], row["created_at"]),
            ("queue", row["first_sent_at"], row["created_at"]),
            ("answer", row["rented_at"], row["first_sent_at"]),
            ("start", row["ready_at"], row["rented_at"]),
            ("detect", row["ready_at"], pods_running),
        ):
            if (value := _seconds(later, earlier)) is not None:
                parts[name].append(value)
    return {
        name: {f"p{q}_s": r(pct(values, q)) for q in (50, 90, 99)} | {"n": len(values)}
        for name, values in parts.items()
    }


def report(run: Run, ready: dict[str, Any]) -> None:
    def line(name: str) -> str:
        figures = ready[name]
        return f"{figures['p50_s']} / {figures['p90_s']} / {figures['p99_s']} s"

    say(f"    {ready['ready']}/{ready['rentals']} ready; time to ready p50/p90/p99 {line('total')}")
    say(f"    of which the simulator's start delay {ready['start_seconds']:g} s and its rent answer {line('answer')}")
    say(f"    dashboard's share: submitted -> sent {line('queue')}; ready detected after the pods ran {line('detect')}")
    run.summary.append(("time to ready p50 / p90 / p99 (s)", line("total")))
    run.summary.append(("  ours: submitted -> sent p50 / p90 / p99", line("queue")))
    run.summary.append(("  ours: ready detection lag p50 / p90 / p99", line("detect")))
