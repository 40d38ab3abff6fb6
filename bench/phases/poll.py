"""Phase 2: poll cost, an open rental page's polls under load against a trivial view on the same server."""

from __future__ import annotations

import re
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from django.core.cache import caches

from bench.context import SSH_KEY, People, Run, Stack
from bench.figures import r
from bench.load import ensure_wrk, load_python, load_wrk
from bench.people import cookie_header
from rentals.models import ClusterMember, Rental, RentAttempt
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.web import progress
from scripts.harness import say

GOAL_RATIO = 0.6
POLLER = re.compile(r'<div id="poller" hx-get="([^"]+)"')


def measure_poll(run: Run, stack: Stack, people: People) -> None:
    """Load the trivial view and each kind of poll in interleaved rounds; record rates, latencies and ratios."""
    args = run.args
    wrk = ensure_wrk(args.load_tool)
    tool = "wrk" if wrk else "python-httpx-asyncio"
    say(
        f"\n[2] poll cost: {args.poll_clients} clients, {args.poll_seconds:g} s per run, "
        f"{args.poll_rounds} rounds, {tool}"
    )
    rental = rental_in_flight(people)
    cookie = cookie_header(people.user_http)
    targets = poll_targets(stack.web, people, rental)
    for name, url in targets.items():  # each answers (200, or 204 for nothing new) before it is loaded
        code = people.user_http.get(url).status_code
        if code != (204 if name == "progress_unchanged" else 200):
            raise RuntimeError(f"{name} {url} answered {code}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
    for _round in range(args.poll_rounds):
        for name, url in targets.items():
            if wrk:
                figures = load_wrk(wrk, url, cookie, args.poll_clients, args.poll_seconds)
            else:
                figures = load_python(url, cookie, args.poll_clients, args.poll_seconds)
            runs[name].append(figures)
            say(
                f"    {name:19s} {figures['rps']:8.1f} req/s  p99 {figures['p99_ms']} ms"
                f"  (non-2xx {figures['non_2xx']})"
            )
    poll: dict[str, Any] = {"tool": tool, "clients": args.poll_clients, "seconds_per_run": args.poll_seconds}
    poll.update(poll_figures(runs))
    poll["rounds"] = args.poll_rounds
    poll["section_render_ms"] = r(section_render_ms(rental))
    poll["goal_ratio"] = GOAL_RATIO
    poll["meets_goal"] = poll["ratio"] >= GOAL_RATIO
    # What an open page sends while its rental has not changed (most polls): the not-modified shortcut.
    poll["meets_goal_unchanged"] = poll["ratio_unchanged"] >= GOAL_RATIO
    run.result["poll"] = poll
    summarise_poll(run, poll)


def rental_in_flight(people: People) -> Rental:
    """Return a rental in flight: rented, two members running and two starting, one confirmed attempt."""
    now = datetime.now(UTC)
    order = RentOrder(
        fabric_id="poll-fabric",
        executor_ids=["poll-a", "poll-b", "poll-c", "poll-d"],
        pod_name="poll-bench",
        public_keys=[SSH_KEY],
        template_id=people.template_id,
    )
    rental = rental_submit(user=people.alice, customer=people.customer, customer_ref="bench", order=order)
    # No worker runs during this phase: the rows are written as the engine would have left them.
    Rental.objects.filter(pk=rental.pk).update(
        status="rented", attempt_count=1, first_sent_at=now, last_sent_at=now, cluster_id="poll-cluster", version=3
    )
    RentAttempt.objects.create(
        rental=rental,
        number=1,
        started_at=now,
        duration_ms=40,
        http_status=200,
        classification="confirmed",
        request_id="req_poll",
    )
    for rank in range(4):
        running = rank < 2
        ClusterMember.objects.create(
            rental=rental,
            pod_id=f"poll-pod-{rank}",
            rank=rank,
            overlay_ip=f"10.42.0.{rank + 1}",
            status="RUNNING" if running else "PENDING",
            phase="" if running else "pulling_image",
            eta_seconds=None if running else 20,
            ssh_command=f"ssh root@198.18.0.{rank} -p 22" if running else "",
            executor_id=f"poll-{'abcd'[rank]}",
            price_per_hour="17",
            gpu_count=8,
            running_since=now if running else None,
        )
    return rental


def poll_targets(web: str, people: People, rental: Rental) -> dict[str, str]:
    """Return the URLs to load: the trivial view and the three polls an open page of `rental` sends.

    Every poll is exactly what an open page asks: the URL in its poller (the version it shows and its signed
    token), taken from the page as htmx takes it.
    """
    user_http = people.user_http
    page = user_http.get(f"{web}/rentals/{rental.public_id}/").text
    poller = POLLER.search(page)
    if poller is None:
        raise RuntimeError("the rental page has no poller")
    progress_url = web + poller.group(1).replace("&amp;", "&")
    # Then the rental changes as the engine's member sync changes it: the third member starts running
    # (a new version). The page's next poll gets the new progress section and a new poller.
    ClusterMember.objects.filter(rental=rental, rank=2).update(
        status="RUNNING",
        phase="",
        eta_seconds=None,
        ssh_command="ssh root@198.18.0.2 -p 22",
        running_since=datetime.now(UTC),
    )
    Rental.objects.filter(pk=rental.pk).update(version=4)
    changed = user_http.get(progress_url).text
    if 'hx-swap-oob="true"' not in changed or "Nodes starting 3/4" not in changed:
        raise RuntimeError("the poll after a change did not bring the new progress section")
    poller = POLLER.search(changed)
    if poller is None:
        raise RuntimeError("the progress answer has no poller")
    return {
        "trivial": f"{web}/bench/trivial/",
        "progress": progress_url,
        "progress_unchanged": web + poller.group(1).replace("&amp;", "&"),
        # Without the token (first poll of a new session, or a token past its 5 minutes): the full check.
        "progress_checked": f"{web}/rentals/{rental.public_id}/progress/?v=3&i=2.0",
    }


def poll_figures(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Return each target's rate, latencies and errors over the rounds, and each poll's ratio to trivial."""
    poll: dict[str, Any] = {}
    for name, items in runs.items():
        poll[f"{name}_rps"] = r(statistics.fmean(item["rps"] for item in items), 1)
        poll[f"{name}_p99_ms"] = r(max(item["p99_ms"] for item in items))
        poll[f"{name}_p50_ms"] = r(statistics.median(item["p50_ms"] for item in items if item["p50_ms"]))
        poll[f"{name}_errors"] = sum(item["non_2xx"] for item in items)
    # Each round measures the trivial view just before the polls, so a ratio compares runs seconds apart;
    # the median over rounds keeps one noisy run (a neighbour's burst on a shared host) from deciding it.
    for key, name in (
        ("ratio", "progress"),
        ("ratio_unchanged", "progress_unchanged"),
        ("ratio_checked", "progress_checked"),
    ):
        per_round = [run["rps"] / base["rps"] for run, base in zip(runs[name], runs["trivial"], strict=True)]
        poll[key] = r(statistics.median(per_round), 3)
        poll[f"{key}_rounds"] = [r(value, 3) for value in per_round]
    return poll


def section_render_ms(rental: Rental, samples: int = 50) -> float | None:
    """Median time to render a rental's progress section on a cache miss (the first poll after a change).

    Measured in this process, on the same code and database as the server: the poll benchmark asks for
    one version over and over, so after its first request per server process it reads the rendered section
    from the per-process fragment cache; this is what each new version costs once.
    """
    times = []
    for _ in range(samples):
        caches[progress.FRAGMENT_CACHE].clear()
        fresh = Rental.objects.get(pk=rental.pk)
        started = time.perf_counter()
        progress.progress_section(fresh, may_act=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def summarise_poll(run: Run, poll: dict[str, Any]) -> None:
    """Add the poll figures to the run's closing summary."""
    run.summary.append(
        ("poll progress / trivial req/s", f"{poll['progress_rps']} / {poll['trivial_rps']} (ratio {poll['ratio']})")
    )
    run.summary.append(
        ("poll unchanged req/s (ratio)", f"{poll['progress_unchanged_rps']} ({poll['ratio_unchanged']})")
    )
    run.summary.append(
        ("poll checked (no token) req/s (ratio)", f"{poll['progress_checked_rps']} ({poll['ratio_checked']})")
    )
    run.summary.append(
        (
            "poll p99 progress / unchanged / checked / trivial (ms)",
            f"{poll['progress_p99_ms']} / {poll['progress_unchanged_p99_ms']} / "
            f"{poll['progress_checked_p99_ms']} / {poll['trivial_p99_ms']}",
        )
    )
    run.summary.append(("progress section render, uncached (ms)", f"{poll['section_render_ms']}"))
