"""Phase 5: engine throughput, rentals settled per second by 1, 2, 4 worker processes, against direct calls."""

from __future__ import annotations

import threading
import time

from bench.context import SETTLED, SSH_KEY, People, Run
from bench.direct import Direct
from bench.figures import r
from bench.workers import MeasuredWorker
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from scripts.harness import say, wait_until


def measure_engine(run: Run, people: People, direct: Direct, worker: MeasuredWorker) -> None:
    """Per worker count: submit the rentals, time until all settle, then the same calls sent directly."""
    n = run.args.engine_rentals
    run.result["engine"] = {"rentals_per_run": n, "runs": []}
    say(f"\n[5] engine throughput: {n} rentals per run, settled = a state the engine does not leave")
    for count in [int(c) for c in run.args.engine_workers.split(",") if c.strip()]:
        worker.start(count)
        settled, confirmed, elapsed = engine_run(run, people, direct.node_pairs(n), count)
        worker.sample_memory()
        # Reference: the same rent calls straight to the simulator, `count` at a time.
        ref_elapsed = direct_run(direct, direct.node_pairs(n), count)
        rate = settled / elapsed
        ref_rate = n / ref_elapsed
        figures = {
            "workers": count,
            "settled": settled,
            "confirmed": confirmed,
            "seconds": r(elapsed),
            "rentals_per_s": r(rate),
            "direct_per_s": r(ref_rate),
            "ratio": r(rate / ref_rate, 3),
        }
        run.result["engine"]["runs"].append(figures)
        say(
            f"    {count} worker process(es): {rate:.1f} rentals/s ({settled}/{n} settled, {confirmed} "
            f"confirmed, {elapsed:.1f} s); direct x{count}: {ref_rate:.1f}/s; ratio {rate / ref_rate:.3f}"
        )
        run.summary.append((f"engine {count} worker(s) rentals/s (ratio)", f"{rate:.1f} (x{rate / ref_rate:.3f})"))


def engine_run(run: Run, people: People, pairs: list[tuple[str, list[str]]], count: int) -> tuple[int, int, float]:
    """Submit one rental per pair and wait (within the budget) until all settle.

    Return how many settled, how many were confirmed, and the seconds from the first submit.
    """
    t_start = time.monotonic()
    ids = []
    for index, (fabric_id, node_ids) in enumerate(pairs):
        order = RentOrder(
            fabric_id=fabric_id,
            executor_ids=node_ids,
            pod_name=f"engine-{count}-{index}",
            public_keys=[SSH_KEY],
            template_id=people.template_id,
        )
        rental = rental_submit(user=people.alice, customer=people.customer, customer_ref="bench", order=order)
        ids.append(rental.pk)
    settled = wait_until(
        lambda: Rental.objects.filter(pk__in=ids, status__in=SETTLED).count(),
        lambda done: done == len(ids),
        timeout=run.args.engine_budget,
        interval=0.02,
    )
    elapsed = time.monotonic() - t_start
    confirmed = Rental.objects.filter(pk__in=ids, status__in=("rented", "ready")).count()
    return settled or 0, confirmed, elapsed


def direct_run(direct: Direct, pairs: list[tuple[str, list[str]]], count: int) -> float:
    """Send one rent call per pair straight to the simulator from `count` threads; return the seconds taken."""
    t_ref = time.monotonic()
    lock = threading.Lock()
    queue = list(enumerate(pairs))

    def sender() -> None:
        while True:
            with lock:
                if not queue:
                    return
                index, (fabric_id, node_ids) = queue.pop()
            direct.rent(fabric_id, node_ids, 100000 + index)

    threads = [threading.Thread(target=sender) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - t_ref
