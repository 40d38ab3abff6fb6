"""Phase 1: submit-to-upstream latency, from `POST /rent/` to the simulator receiving the rent call."""

from __future__ import annotations

import re
import statistics
import time
import uuid
from functools import partial
from typing import Any

from bench.context import SSH_KEY, People, Run, Stack
from bench.direct import Direct
from bench.figures import pct, r
from bench.workers import MeasuredWorker
from rentals.models import Rental
from scripts.harness import say, wait_until


def measure_submit(run: Run, stack: Stack, people: People, direct: Direct, worker: MeasuredWorker) -> None:
    """Post rentals through the rent form one at a time, then the same calls straight to the simulator."""
    n = run.args.submit_rentals
    say(f"\n[1] submit-to-upstream latency: {n} rentals through the rent form, one at a time")
    worker.start(2)
    posts, form_errors = post_rentals(run, people, direct.node_pairs(n))
    worker.sample_memory()
    receipts = direct.receipts()
    keys = dict(
        Rental.objects.filter(public_id__in=[p for p, _, _ in posts]).values_list("public_id", "idempotency_key")
    )
    latencies = []
    post_times = []
    for public_id, t0, post_ms in posts:
        key = str(keys.get(uuid.UUID(public_id)))
        if key in receipts:
            latencies.append((receipts[key] - t0) * 1000)
            post_times.append(post_ms)
    say(f"    direct reference: {n} httpx POSTs of the same body to the simulator")
    direct_keys, direct_rtt = [], []
    for index, (fabric_id, ids) in enumerate(direct.node_pairs(n)):
        key, t0, rtt = direct.rent(fabric_id, ids, index)
        direct_keys.append((key, t0))
        direct_rtt.append(rtt)
    receipts = direct.receipts()
    direct_lat = [(receipts[key] - t0) * 1000 for key, t0 in direct_keys if key in receipts]
    run.result["submit"] = {
        "broker": stack.broker_label,
        "rentals": len(latencies),
        "requested": n,
        "form_errors": form_errors,
        "budget_reached": len(posts) + form_errors < n,
        **submit_figures(latencies, post_times, direct_lat, direct_rtt),
    }
    s = run.result["submit"]
    say(
        f"    dashboard p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms (POST answered p50 "
        f"{s['post_response_p50_ms']} ms); direct p50 {s['direct_p50_ms']} ms "
        f"(round trip {s['direct_roundtrip_p50_ms']} ms); overhead p50 {s['overhead_p50_ms']} ms"
    )
    run.summary.append(("submit p50 / p99 (ms)", f"{s['p50_ms']} / {s['p99_ms']}"))
    run.summary.append(("submit overhead p50 (ms), ratio", f"{s['overhead_p50_ms']}, x{s['ratio_p50']}"))


def post_rentals(
    run: Run, people: People, pairs: list[tuple[str, list[str]]]
) -> tuple[list[tuple[str, float, float]], int]:
    """Post one rental per node pair, each once the previous one's call was made, within the budget.

    Return [(public id, t0 epoch, POST ms)] and how many posts the form refused.
    """
    user_http = people.user_http
    posts: list[tuple[str, float, float]] = []
    form_errors = 0
    user_http.get("/rent/", params={"fabric": pairs[0][0]})  # the form's CSRF cookie comes with the rent page
    submit_deadline = time.monotonic() + run.args.submit_budget
    for index, (fabric_id, ids) in enumerate(pairs):
        if time.monotonic() > submit_deadline:
            say(f"    budget of {run.args.submit_budget:g} s reached after {index} rentals")
            break
        data = {
            "csrfmiddlewaretoken": user_http.cookies.get("csrftoken", ""),
            "fabric": fabric_id,
            "customer": str(people.customer.pk),
            "executor_ids": ids,
            "pod_name": f"bench-{index}",
            "ssh_public_keys": SSH_KEY,
            "template_id": people.template_id,
            "enable_volume_encryption": "on",
            "enable_backups": "on",
            "submit_token": str(uuid.uuid4()),
        }
        t0 = time.time()
        p0 = time.perf_counter()
        response = user_http.post(f"/rent/?fabric={fabric_id}", data=data)
        post_ms = (time.perf_counter() - p0) * 1000
        match = re.search(r"/rentals/([0-9a-f-]{36})/", response.headers.get("location", ""))
        if response.status_code != 302 or not match:
            form_errors += 1
            continue
        posts.append((match.group(1), t0, post_ms))
        # One at a time: wait until the worker has made the call, so no rental queues behind another.
        wait_until(partial(rental_status, match.group(1)), is_sent, timeout=20, interval=0.005)
    return posts, form_errors


def rental_status(public_id: str) -> str | None:
    return Rental.objects.filter(public_id=public_id).values_list("status", flat=True).first()


def is_sent(status: str | None) -> bool:
    return status not in ("queued", "sending")


def submit_figures(
    latencies: list[float], post_times: list[float], direct_lat: list[float], direct_rtt: list[float]
) -> dict[str, Any]:
    """Return the phase's figures: the dashboard's latency against the direct reference's."""
    d50, d99 = pct(latencies, 50), pct(latencies, 99)
    r50, r99 = pct(direct_lat, 50), pct(direct_lat, 99)
    rtt50 = pct(direct_rtt, 50)
    overhead_p50 = ratio_p50 = None
    if d50 is not None and r50 is not None:
        overhead_p50, ratio_p50 = d50 - r50, d50 / max(r50, 1.0)
    return {
        "p50_ms": r(d50),
        "p99_ms": r(d99),
        "mean_ms": r(statistics.fmean(latencies) if latencies else None),
        "post_response_p50_ms": r(pct(post_times, 50)),
        "post_response_p99_ms": r(pct(post_times, 99)),
        "direct_p50_ms": r(r50),
        "direct_p99_ms": r(r99),
        "direct_roundtrip_p50_ms": r(rtt50),
        "direct_roundtrip_p99_ms": r(pct(direct_rtt, 99)),
        "overhead_p50_ms": r(overhead_p50),
        "overhead_p99_ms": r(d99 - r99) if d99 is not None and r99 is not None else None,
        "ratio_p50": r(ratio_p50),
        "ratio_p50_vs_roundtrip": r(d50 / rtt50) if d50 is not None and rtt50 else None,
        "clock": "simulator GET /_sim/requests `at` (wall clock, ms) minus client time.time() before the POST",
    }
