"""Phase: a burst. N rentals submitted at once while every rent call takes L ms upstream, with the workers the
Procfile starts (`make run`): when does the last one reach Lium, and does another customer wait behind it?"""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from bench.context import SETTLED, SSH_KEY, People, Run, Stack
from bench.direct import Direct
from bench.figures import pct, r
from bench.workers import ProcfileWorkers
from rentals.models import Rental, RentalEvent
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from scripts.harness import say, wait_until
from simulator.clock import parse_iso


def measure_burst(run: Run, stack: Stack, people: People, direct: Direct) -> None:
    """Submit the burst through the service (one customer, one credential) and another customer's single
    rental half-way; figures under `burst`."""
    n, latency_ms = run.args.burst_rentals, run.args.burst_latency_ms
    say(f"\n[burst] {n} rentals submitted at once, every rent call held {latency_ms} ms upstream")
    other = other_customer(people)
    workers = ProcfileWorkers(run.procs, stack.child_env)
    workers.start()
    try:
        stack.sim.set_faults({"seed": 1, "rules": [{"fault": "latency", "ms": latency_ms}]})
        pairs = direct.node_pairs(n + 2)
        # Reference: one rental alone, from submit to its call reaching the simulator.
        alone = submit(people, other, pairs.pop(), "burst-alone")
        wait_settled([alone[0]], timeout=30 + latency_ms / 1000)
        submitted, single = submit_at_once(people, other, pairs, n)
        burst_ids = [pk for pk, _ in submitted]
        settled_at = wait_settled([*burst_ids, single[0]], timeout=120 + 2 * n * latency_ms / 1000)
        ready = wait_until(
            lambda: Rental.objects.filter(pk__in=burst_ids, status="ready").count(),
            lambda count: count == len(burst_ids),
            timeout=60,
            interval=0.5,
        )
        workers.sample_memory()
        receipts = direct.receipts()
        keys = dict(
            Rental.objects.filter(pk__in=[*burst_ids, single[0], alone[0]]).values_list("pk", "idempotency_key")
        )
        run.result["burst"] = figures(
            n, latency_ms, submitted, single, alone, {pk: receipts.get(str(key)) for pk, key in keys.items()}
        )
        run.result["burst"].update(
            settled_s=r(settled_at - submitted[0][1]) if settled_at else None,
            tracking_delay_p50_ms=r(pct(tracking_delays(stack, burst_ids), 50)),
            ready=ready,
            workers=workers.described(),
        )
    finally:
        stack.sim.clear_faults()
        workers.stop()
    b = run.result["burst"]
    say(
        f"    all sent in {b['all_sent_s']} s (goal <= {1.5 * latency_ms / 1000:g} s); first call p50 "
        f"{b['first_call_p50_ms']} ms; settled in {b['settled_s']} s; other customer's extra wait "
        f"{b['fair_wait_ms']} ms; tracking delay p50 {b['tracking_delay_p50_ms']} ms"
    )
    run.summary.append((f"burst of {n}: all sent (s), goal <= {1.5 * latency_ms / 1000:g}", f"{b['all_sent_s']}"))
    run.summary.append(("burst: other customer's extra wait (ms)", f"{b['fair_wait_ms']}"))


def other_customer(people: People) -> Any:
    """Return a second customer on the same credential, alice a member of it."""
    from accounts.models import Customer, Membership

    customer = Customer.objects.create(
        name="Burst Other", customer_ref="burst-other", default_credential=people.credential
    )
    Membership.objects.create(user=people.alice, customer=customer)
    return customer


SUBMITTERS = 16


def submit_at_once(
    people: People, other: Any, pairs: list[tuple[str, list[str]]], n: int
) -> tuple[list[tuple[int, float]], tuple[int, float]]:
    """Submit the burst from SUBMITTERS threads at once (many users pressing "Rent" together), and the other
    customer's single rental once half of it is in. Return the burst's (id, submit time) in submit order and
    the single one's."""
    from django.db import connection

    half = threading.Event()
    done: list[tuple[int, float]] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        try:
            sent = submit(people, people.customer, pairs[index], f"burst-{index}")
            with lock:
                done.append(sent)
                if len(done) >= n // 2:
                    half.set()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        futures = [pool.submit(one, index) for index in range(n)]
        half.wait(timeout=300)
        single = submit(people, other, pairs[n], "burst-other")  # another customer's rental, mid-burst
        for future in futures:
            future.result()
    return sorted(done, key=lambda item: item[1]), single


def submit(people: People, customer: Any, pair: tuple[str, list[str]], name: str) -> tuple[int, float]:
    """Submit one rental through `rental_submit` (as the rent form does); return its id and the wall-clock
    time just before the submit."""
    fabric_id, node_ids = pair
    order = RentOrder(
        fabric_id=fabric_id,
        executor_ids=node_ids,
        pod_name=name,
        public_keys=[SSH_KEY],
        template_id=people.template_id,
    )
    t0 = time.time()
    rental = rental_submit(user=people.alice, customer=customer, customer_ref=customer.customer_ref, order=order)
    return rental.pk, t0


def wait_settled(ids: list[int], timeout: float) -> float | None:
    """Wait until every rental is in a state the engine does not leave; return that wall-clock time."""
    done = wait_until(
        lambda: Rental.objects.filter(pk__in=ids, status__in=SETTLED).count(),
        lambda count: count == len(ids),
        timeout=timeout,
        interval=0.05,
    )
    return time.time() if done == len(ids) else None


def figures(
    n: int,
    latency_ms: int,
    submitted: list[tuple[int, float]],
    single: tuple[int, float],
    alone: tuple[int, float],
    receipt: dict[int, float | None],
) -> dict[str, Any]:
    """Return the phase's figures from the submit times and the simulator's receipt of each first call."""
    arrived = [(at, t0) for pk, t0 in submitted if (at := receipt.get(pk)) is not None]
    waits = [(at - t0) * 1000 for at, t0 in arrived]
    received = [at for at, _ in arrived]
    all_sent = max(received) - submitted[0][1] if len(received) == len(submitted) else None
    alone_wait = (receipt[alone[0]] or 0) - alone[1] if receipt.get(alone[0]) else None
    single_wait = (receipt[single[0]] or 0) - single[1] if receipt.get(single[0]) else None
    fair_wait = (single_wait - alone_wait) * 1000 if single_wait is not None and alone_wait is not None else None
    return {
        "rentals": n,
        "latency_ms": latency_ms,
        "sent": len(received),
        "first_call_p50_ms": r(pct(waits, 50)),
        "first_call_p99_ms": r(pct(waits, 99)),
        "first_call_mean_ms": r(statistics.fmean(waits) if waits else None),
        "all_sent_s": r(all_sent),
        "goal_all_sent_s": r(1.5 * latency_ms / 1000),
        "submit_s": r(submitted[-1][1] - submitted[0][1]),
        "fair_wait_ms": r(fair_wait),
        "alone_first_call_ms": r(alone_wait * 1000 if alone_wait is not None else None),
        "other_first_call_ms": r(single_wait * 1000 if single_wait is not None else None),
        "clock": "simulator GET /_sim/requests `at` minus client time.time() before rental_submit",
    }


def tracking_delays(stack: Stack, rental_ids: list[int]) -> list[float]:
    """Return, per ready rental, ms from its last member turning RUNNING upstream (the pod row's `updated_at`
    once running) to the rental's `ready` event."""
    pods = {row["id"]: row for row in stack.sim.pods() or [] if row.get("status") == "RUNNING"}
    ready_at = dict(
        RentalEvent.objects.filter(rental_id__in=rental_ids, to_status="ready").values_list("rental_id", "at")
    )
    delays = []
    for rental_id, pod_ids in Rental.objects.filter(pk__in=list(ready_at)).values_list("pk", "pod_ids"):
        running = [parse_iso(pods[p]["updated_at"]) for p in pod_ids or [] if p in pods]
        if running and len(running) == len(pod_ids):
            became_ready: datetime = ready_at[rental_id]
            delays.append((became_ready.timestamp() - max(running)) * 1000)
    return delays
