#!/usr/bin/env python
"""Chaos run: rent through faults and killed workers, then check the database against the upstream's ledger.

    make chaos CHAOS_ARGS="--rentals 300 --seed 7"
    make chaos CHAOS_ARGS="--profile adversarial --rentals 300"
    python scripts/chaos.py --rentals 50 --broker redis

It starts, in a fresh run folder, everything it needs and nothing shared:

- the Lium simulator with random faults on the rent route (latency, 429s, 5xx before and after the commit,
  dropped connections before and after the commit, slow commits longer than the client's timeout, and a
  small share of "outcome unknown" answers that may or may not have rented);
- its own database (SQLite in the run folder; with `DATABASE_URL`/`--database-url` pointing at PostgreSQL,
  a scratch database on that server, dropped at the end, unless `--database-as-is`);
- its own broker: the embedded file-system transport, or Redis (a private `redis-server` on a free port when
  the binary exists, restarted once mid-run; otherwise the given `CELERY_BROKER_URL`, not restarted);
- `--workers` real `celery worker` processes (exactly one also runs beat, hence the sweeper).

It submits rentals through `rentals.services.rental_submit` (the service behind the rent form), SIGKILLs
worker process groups at random moments and starts replacements, waits until every rental has settled
(a state the engine does not leave by itself), then compares every rental with the simulator's ledger,
request log and pod list. The last line of output is one JSON object; the exit status is 1 when any of
duplicates, lost, untruthful or key_reused is above 0, or, in the adversarial profile, unknown_with_cluster
(2 when the run could not be set up).

`--profile adversarial` adds an upstream that lies (2xx answers that prove nothing, pod listings that are
malformed or empty, delete outages), a second simulator that does not honour Idempotency-Key for a share of
the rentals, and an operator who retries, reconciles, confirms and terminates through the ops services.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts.harness import (  # noqa: E402 - the repository is put on the path just above
    SIM_KEY,
    ContestedOffers,
    Offers,
    PrivatePostgres,
    Processes,
    Redis,
    ScratchPostgres,
    Simulator,
    Workers,
    delete_call_cluster,
    django_setup_and_migrate,
    elapsed,
    free_port,
    interrupt_on,
    say,
    wait_for_http,
)

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ chaos@run"

# States the engine never leaves by itself (the rest — queued, sending, retrying, terminating — it moves on).
SETTLED_STATES = (
    "rented",
    "ready",
    "check_failed",
    "degraded",
    "refused",
    "failed",
    "unknown",
    "not_rented",
    "cancelled",
    "terminated",
)
HOLDS_CLUSTER = ("rented", "verifying", "check_failed", "ready", "degraded", "terminating", "terminated")
NOTHING_RENTED = ("refused", "failed", "not_rented", "cancelled")
# A pod in this state is on its way out; any other listed pod is alive (and billing).
LEAVING_POD_STATUSES = ("DELETING",)

# Fast knobs for every process of the run (the script's own Django too): short backoffs and leases, a
# client timeout shorter than the slowest injected commit (so that commit ends in a read timeout).
# A sweep every 2 s re-enqueueing `queued` rows only after 15 s: the sweeper re-sends every due row on
# every sweep, so shorter values flood a slow (embedded) queue with duplicate messages. The environment
# overrides any of these.
FAST_ENV = {
    "SWEEP_INTERVAL_SECONDS": "2",
    "RENT_QUEUED_STUCK_SECONDS": "15",
    "RENT_BACKOFF_BASE_SECONDS": "0.2",
    "RENT_BACKOFF_CAP_SECONDS": "2",
    "RENT_LEASE_SECONDS": "8",
    "LIUM_TIMEOUT_SECONDS": "3",
    "LIUM_CONNECT_TIMEOUT_SECONDS": "2",
    "RENT_MAX_ATTEMPTS": "8",
    "POD_POLL_MIN_INTERVAL_SECONDS": "2",
    # A run lasts minutes, not hours: retry a failed DELETE and look for an unknown rental's cluster within
    # seconds, so that an outage that ends before the run does is seen to settle.
    "CLUSTER_DELETE_BACKOFF_BASE_SECONDS": "1",
    "CLUSTER_DELETE_BACKOFF_CAP_SECONDS": "8",
    "RECONCILE_LOOK_BASE_SECONDS": "2",
    # Verified rentals (issue 27): a check whose worker was SIGKILLed is run again within seconds.
    "FABRIC_CHECK_ALLREDUCE_SECONDS": "15",
    "FABRIC_CHECK_STALE_SECONDS": "25",
}

# The adversarial operator confirms "not rented" only this long after the rental's last send: longer than
# any injected slow commit or trickle, so a commit still on its way cannot land after the confirmation.
QUIET_BEFORE_NOT_RENTED = timedelta(seconds=20)
# How long the operator works through the outcome-unknown rentals once everything else has settled.
FINAL_PASS_SECONDS = 75.0
# Shared-account: more "outcome unknown" answers (half rent nothing), so more reconciliations look at an account
# whose other customers rent the same nodes under the same pod names; and the fabrics they all order on.
SHARED_OUTCOME_UNKNOWN = 0.1
CONTESTED_FABRICS = 2
# Cluster sizes drawn per order (nodes). Shared-account: mostly one shape, so an order that rented nothing is
# often followed on its nodes by one of the same size, which a reconciliation could take for its own.
SIZES = (2, 2, 2, 3, 4)
SHARED_SIZES = (2, 2, 2, 2, 3)


def fault_rules(seed: int, scale: float, outcome_unknown: float = 0.01) -> dict[str, Any]:
    """Return the simulator's fault rule set; `scale` multiplies every probability."""

    def p(value: float) -> float:
        return round(min(1.0, value * scale), 4)

    return {
        "seed": seed,
        "rules": [
            {"fault": "latency", "probability": p(0.35), "ms": [20, 400]},
            {"fault": "rate_limit", "probability": p(0.07), "retry_after": 1},
            {"fault": "error_before_commit", "probability": p(0.07), "status": 503},
            {"fault": "drop_before_commit", "probability": p(0.03)},
            # Longer than LIUM_TIMEOUT_SECONDS: the client gives up, the commit happens after all.
            {"fault": "slow_commit", "probability": p(0.04), "seconds": 4.5},
            {"fault": "slow_commit", "probability": p(0.04), "seconds": 1.5},
            {"fault": "outcome_unknown", "probability": p(outcome_unknown), "commit": 0.5},
            {"fault": "error_after_commit", "probability": p(0.10), "status": 502},
            {"fault": "drop_after_commit", "probability": p(0.06)},
        ],
    }


def adversarial_rules(seed: int, scale: float, outcome_unknown: float = 0.01) -> dict[str, Any]:
    """Return the standard rules plus an upstream that misbehaves: answers that prove nothing, lying pod
    listings, delete outages, stray cookies."""

    def p(value: float) -> float:
        return round(min(1.0, value * scale), 4)

    misbehaviour = [
        # A 2xx whose body is HTML or empty proves nothing, whether or not the order committed behind it.
        {"fault": "html_2xx", "probability": p(0.02), "commit": True},
        {"fault": "html_2xx", "probability": p(0.01), "commit": False},
        {"fault": "empty_2xx", "probability": p(0.02), "commit": True},
        {"fault": "empty_2xx", "probability": p(0.01), "commit": False},
        {"fault": "no_pod_ids", "probability": p(0.03)},
        {"fault": "long_ids", "route": "rent", "probability": p(0.02)},
        # Each chunk arrives inside the read timeout, the whole answer takes twice the client's timeout.
        {"fault": "trickle", "probability": p(0.02), "interval": 0.5, "seconds": 6, "commit": True},
        {"fault": "trickle", "probability": p(0.01), "interval": 0.5, "seconds": 6, "commit": False},
        # Pod listings that prove nothing: not a list, an HTML page, junk rows, or empty while clusters run.
        {"fault": "pods_malformed", "probability": p(0.02), "shape": "object"},
        {"fault": "pods_malformed", "probability": p(0.02), "shape": "html"},
        {"fault": "pods_malformed", "probability": p(0.02), "shape": "junk_rows"},
        {"fault": "pods_empty", "probability": p(0.05)},
        {"fault": "long_ids", "route": "pods", "probability": p(0.02)},
        {"fault": "set_cookie", "route": "*", "probability": p(0.2)},
        # Terminations meet a remove route that is down half the time (an answer, or a dropped connection).
        {"fault": "delete_outage", "probability": p(0.35), "status": 503},
        {"fault": "delete_outage", "probability": p(0.15), "drop": True},
    ]
    standard = fault_rules(seed, scale, outcome_unknown)
    return {"seed": seed, "rules": standard["rules"] + misbehaviour}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Return the run's options; exit with a usage message when they cannot make a run."""
    p = option_parser()
    args = p.parse_args(argv)
    if args.rentals < 1 or args.workers < 1:
        p.error("--rentals and --workers must be at least 1")
    if args.restart_postgres < 0:
        p.error("--restart-postgres must be 0 or more")
    if not 0 <= args.unhonoured_share <= 1 or not 0 <= args.terminate_share <= 1:
        p.error("--unhonoured-share and --terminate-share must be between 0 and 1")
    if args.customers < 1 or args.pod_names < 1:
        p.error("--customers and --pod-names must be at least 1")
    if args.outcome_unknown is None:
        args.outcome_unknown = SHARED_OUTCOME_UNKNOWN if args.profile == "shared-account" else 0.01
    if not 0 <= args.outcome_unknown <= 1:
        p.error("--outcome-unknown must be between 0 and 1")
    return args


def option_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/chaos.py",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--profile",
        choices=["standard", "adversarial", "shared-account"],
        default="standard",
        help="adversarial: a lying upstream, a non-idempotent second upstream, and an operator at work; "
        "shared-account: the adversarial upstream and operator, with --customers customers on one credential "
        "ordering --pod-names pod names on the same nodes",
    )
    p.add_argument("--rentals", type=int, default=300, help="how many rentals to submit")
    p.add_argument(
        "--verify-every",
        type=int,
        default=4,
        help="every Nth rental opts in to the fabric check, with the simulator's pods over SSH (0: none)",
    )
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000, help="seed for faults, nodes and kills")
    p.add_argument("--workers", type=int, default=2, help="worker processes running at once (one runs beat)")
    p.add_argument("--concurrency", type=int, default=4, help="pool processes per worker")
    p.add_argument("--timeout", type=float, default=480, help="seconds to wait for every rental to settle")
    p.add_argument("--kill-every", type=float, default=8.0, help="mean seconds between worker SIGKILLs (0: none)")
    p.add_argument("--min-kills", type=int, default=3, help="kill sooner while rentals are in flight until this many")
    p.add_argument("--submit-rate", type=float, default=4.0, help="rentals submitted per second")
    p.add_argument("--fault-scale", type=float, default=1.0, help="multiplies every fault probability (0: none)")
    p.add_argument(
        "--release-after",
        type=float,
        default=0.0,
        help="customers terminate each ready cluster this many seconds later (0: never; the soak keeps the "
        "account's live clusters bounded this way)",
    )
    p.add_argument(
        "--unhonoured-share",
        type=float,
        default=0.2,
        help="adversarial: share of rentals sent to the second simulator, which ignores Idempotency-Key",
    )
    p.add_argument(
        "--customers", type=int, default=4, help="shared-account: customers renting through the one credential"
    )
    p.add_argument(
        "--pod-names", type=int, default=3, help="shared-account: pod names (train-1, train-2, ...) they all use"
    )
    p.add_argument(
        "--outcome-unknown",
        type=float,
        default=None,
        help=f"share of rent calls answered 'outcome unknown' (half of them rent); default 0.01, "
        f"shared-account {SHARED_OUTCOME_UNKNOWN}",
    )
    p.add_argument(
        "--terminate-share",
        type=float,
        default=0.3,
        help="adversarial: share of ready rentals the operator terminates",
    )
    p.add_argument(
        "--operator-every",
        type=float,
        default=3.0,
        help="adversarial: mean seconds between the operator's random actions (a reconcile lists pods, "
        "which the upstream allows about 60 times a minute)",
    )
    p.add_argument(
        "--broker",
        choices=["auto", "embedded", "redis"],
        default="auto",
        help="auto: Redis when CELERY_BROKER_URL is redis://, else the embedded file-system broker",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="default: a SQLite file in the run folder; PostgreSQL gets a scratch database",
    )
    p.add_argument(
        "--database-as-is",
        action="store_true",
        help="use --database-url's database itself (migrate, then delete only this run's rows)",
    )
    p.add_argument(
        "--restart-postgres",
        type=int,
        default=0,
        metavar="N",
        help="run on a PostgreSQL cluster of the run's own (initdb in the run folder) and stop/start it N times "
        "while rentals are in flight, a few seconds each; a web server is probed during each outage (503 with "
        "Retry-After, then 200 again without a restart). Picks Redis as the broker when --broker is auto",
    )
    p.add_argument("--run-dir", default="", help="run folder (default: a new temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the run folder (it is always kept on failure)")
    p.add_argument("--explain", type=int, default=5, help="print the history of this many bad rentals")
    return p


# --- The audit: what the database says against what the simulator saw ------------------------------------


@dataclass(frozen=True)
class RentalView:
    """What the audit needs to know of one rental."""

    pk: int
    pod_name: str
    idempotency_key: str
    status: str
    cluster_id: str = ""
    attempt_count: int = 0
    key_reused_answer: bool = False  # an attempt was answered 422 idempotency_key_reused
    pod_ids: tuple[str, ...] = ()  # the pods the database gives it (its outcome and its member rows)
    executor_ids: tuple[str, ...] = ()  # the nodes it ordered


@dataclass
class Audit:
    """The findings of one comparison; every problem names its rental (None: a ledger entry nobody owns)."""

    problems: dict[str, list[tuple[RentalView | None, str]]] = field(default_factory=lambda: defaultdict(list))
    final_counts: Counter[str] = field(default_factory=Counter)
    unknown_with_cluster: list[RentalView] = field(default_factory=list)
    # Of those, the ones no other rental could be mistaken for (another pod name or other nodes): with customers
    # on one account, a cluster two orders match stays `unknown` for an operator, as it should.
    unknown_unrivalled: list[RentalView] = field(default_factory=list)
    foreign: list[dict[str, Any]] = field(default_factory=list)
    rent_calls: int = 0
    # None when the simulator does not log delete calls (an older one logs only rent calls).
    delete_calls_max_per_rental: int | None = None
    pods_checked: bool = False

    def count(self, kind: str) -> int:
        return len(self.problems[kind])


def live_pods_by_cluster(pods: Iterable[dict[str, Any]]) -> Counter[str]:
    """Count the listed pods that are not on their way out, per cluster id."""
    return Counter(
        str(pod.get("cluster_id"))
        for pod in pods
        if isinstance(pod, dict) and pod.get("cluster_id") and pod.get("status") not in LEAVING_POD_STATUSES
    )


def audit(
    rentals: list[RentalView],
    ledger: list[dict[str, Any]],
    requests_log: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None,
    delete_calls: list[dict[str, Any]] | None = None,
) -> Audit:
    """Compare every rental's final state with the simulators' ledger, rent calls and pod list.

    `pods` is the simulators' listing taken with the faults off (None when it could not be read: then a
    terminated or ready rental is judged by the ledger alone). `delete_calls` are the logged
    DELETE /clusters/{id} calls (None when the simulator does not log them).
    """
    found = Audit()
    # A pod name that only one rental used names that rental's clusters; one that several customers use (the
    # shared-account profile) names none of them, so their ledger entries are matched by key alone.
    unique_names = {name for name, n in Counter(r.pod_name for r in rentals).items() if n == 1}
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in ledger:
        by_key[str(entry.get("idempotency_key"))].append(entry)
        by_name[str(entry.get("pod_name"))].append(entry)
    # A log without `route` has only rent calls in it.
    rent_calls = [entry for entry in requests_log if entry.get("route", "rent") == "rent"]
    bodies_by_key: dict[str, set[str]] = defaultdict(set)
    for entry in rent_calls:
        bodies_by_key[str(entry.get("idempotency_key"))].add(str(entry.get("body_sha256")))
    deletes: Counter[str] = Counter()
    for entry in delete_calls or []:
        cluster = delete_call_cluster(entry)
        if cluster is not None:
            deletes[cluster] += 1
    live = live_pods_by_cluster(pods) if pods is not None else None
    found.pods_checked = live is not None

    our_keys = {r.idempotency_key for r in rentals}
    found.rent_calls = sum(str(entry.get("idempotency_key")) in our_keys for entry in rent_calls)
    most_deletes = 0
    for rental in rentals:
        found.final_counts[rental.status] += 1
        key = rental.idempotency_key
        named = by_name.get(rental.pod_name, []) if rental.pod_name in unique_names else []
        entries = {id(e): e for e in by_key.get(key, []) + named}.values()
        clusters = {str(e.get("cluster_id")) for e in entries}
        if len(by_key.get(key, [])) > 1 or len(clusters) > 1:
            found.problems["duplicates"].append((rental, f"{len(clusters)} clusters: {sorted(clusters)}"))
        judge_state(found, rental, clusters, live)
        if rental.key_reused_answer or len(bodies_by_key.get(key, set())) > 1:
            found.problems["key_reused"].append(
                (rental, f"{len(bodies_by_key.get(key, set()))} distinct bodies sent with one key")
            )
        mine = clusters | ({rental.cluster_id} if rental.cluster_id else set())
        most_deletes = max(most_deletes, sum(deletes[c] for c in mine))
    found.delete_calls_max_per_rental = most_deletes if delete_calls is not None else None
    # A committed rent that no rental of ours accounts for is a cluster nobody will ever see.
    found.foreign = [
        e
        for e in ledger
        if str(e.get("idempotency_key")) not in our_keys and str(e.get("pod_name")) not in unique_names
    ]
    for entry in found.foreign:
        found.problems["duplicates"].append((None, f"ledger entry no rental accounts for: {entry}"))
    judge_claims(found, rentals, ledger)
    found.unknown_unrivalled = [r for r in found.unknown_with_cluster if not rivalled(r, rentals)]
    return found


def judge_claims(found: Audit, rentals: list[RentalView], ledger: list[dict[str, Any]]) -> None:
    """Record each cluster or pod the database gives to two rentals (`clusters_claimed_twice`), and each rental
    that holds a cluster the ledger has under another rental's key (`cross_tenant`)."""
    renter = {str(e["cluster_id"]): str(e.get("idempotency_key")) for e in ledger if e.get("cluster_id")}
    cluster_of_pod = {str(pod): str(e.get("cluster_id")) for e in ledger for pod in e.get("pod_ids") or []}
    rental_by_key = {r.idempotency_key: r for r in rentals}
    cluster_holders: dict[str, list[RentalView]] = defaultdict(list)
    pod_holders: dict[str, list[RentalView]] = defaultdict(list)
    for rental in rentals:
        if rental.cluster_id:
            cluster_holders[rental.cluster_id].append(rental)
        for pod in set(rental.pod_ids):
            pod_holders[pod].append(rental)
        held = {rental.cluster_id} | {cluster_of_pod.get(pod, "") for pod in rental.pod_ids}
        owners = (rental_by_key.get(renter.get(cluster, "")) for cluster in held - {""})
        others = sorted({owner.pk for owner in owners if owner is not None and owner.pk != rental.pk})
        if others:
            found.problems["cross_tenant"].append(
                (rental, f"holds {sorted(held - {''})}, rented under the key of rental {', '.join(map(str, others))}")
            )
    twice = {cluster for cluster, held in cluster_holders.items() if len(held) > 1}
    for cluster in sorted(twice):
        pks = ", ".join(str(r.pk) for r in cluster_holders[cluster])
        found.problems["clusters_claimed_twice"].append(
            (cluster_holders[cluster][0], f"cluster {cluster} held by {pks}")
        )
    for pod, holders in sorted(pod_holders.items()):
        # The pods of a cluster held twice are that one finding, not more.
        if len(holders) > 1 and cluster_of_pod.get(pod) not in twice:
            pks = ", ".join(str(r.pk) for r in holders)
            found.problems["clusters_claimed_twice"].append((holders[0], f"pod {pod} held by {pks}"))


def rivalled(rental: RentalView, rentals: list[RentalView]) -> bool:
    """Tell whether another rental ordered the same pod name on the same nodes (so a cluster matches both)."""
    nodes = set(rental.executor_ids)
    return any(
        other.pk != rental.pk and other.pod_name == rental.pod_name and set(other.executor_ids) == nodes
        for other in rentals
    )


def judge_state(found: Audit, rental: RentalView, clusters: set[str], live: Counter[str] | None) -> None:
    """Record whether the rental's final state tells the truth about the clusters the ledger has for it."""
    problems = found.problems
    if rental.status not in SETTLED_STATES:
        problems["lost"].append((rental, f"still {rental.status} after {rental.attempt_count} attempts"))
    elif rental.status in HOLDS_CLUSTER:
        alive = sum(live[c] for c in clusters) if live is not None else None
        if not clusters:
            problems["untruthful"].append((rental, f"{rental.status} but the ledger has no cluster"))
        elif rental.cluster_id and rental.cluster_id not in clusters:
            problems["untruthful"].append(
                (rental, f"{rental.status} as {rental.cluster_id} but the ledger says {sorted(clusters)}")
            )
        elif rental.status == "terminated" and alive:
            problems["untruthful"].append(
                (rental, f"terminated but the simulator still lists {alive} live pod(s) of {sorted(clusters)}")
            )
        elif rental.status == "ready" and alive == 0:
            problems["untruthful"].append((rental, f"ready but the simulator lists no live pod of {sorted(clusters)}"))
    elif rental.status in NOTHING_RENTED and clusters:
        problems["untruthful"].append((rental, f"{rental.status} but the ledger has {sorted(clusters)}"))
    elif rental.status == "unknown" and clusters:
        found.unknown_with_cluster.append(rental)


# --- The adversarial operator ----------------------------------------------------------------------------


class Operator:
    """An operator at work on the ops pages, through the services those pages call.

    At random moments it asks to retry a retrying or outcome-unknown rental now, or reconciles an
    outcome-unknown one and confirms what the reconciliation found; it terminates a share of the rentals
    that become ready; right after some submits it tries to cancel. It confirms "not rented" only on a
    `no_match` finding and only once the rental's last send is QUIET_BEFORE_NOT_RENTED old.
    """

    def __init__(
        self, *, user: Any, customers: list[Any], rng: random.Random, every: float, terminate_share: float
    ) -> None:
        self.user = user
        self.customers = customers
        self.rng = rng
        self.every = every
        self.terminate_share = terminate_share
        self.counts: Counter[str] = Counter()
        self.unexpected: list[str] = []
        self.decided: set[int] = set()  # ready rentals already drawn for termination (or not)
        self.due: list[tuple[float, int]] = []  # (monotonic time, rental pk) terminations still to ask for
        self.next_action = time.monotonic() + rng.expovariate(1.0 / every) if every > 0 else float("inf")
        self.random_actions = True

    # Each action: call the service, count how it went. A ValidationError is the service saying no (the
    # page shows it); an upstream error is the lying upstream (the page shows it); anything else is a defect.
    def _do(self, action: str, call: Callable[[], Any]) -> Any:
        from django.core.exceptions import ValidationError

        try:
            result = call()
        except ValidationError:
            self.counts[f"{action} refused"] += 1
            return None
        except Exception as exc:
            if type(exc).__module__.startswith("rentals.upstream"):
                self.counts[f"{action} upstream error"] += 1
            else:
                self.counts[f"{action} error"] += 1
                self.unexpected.append(f"{action}: {type(exc).__name__}: {str(exc)[:160]}")
            return None
        self.counts[f"{action} {'done' if result else 'no change'}"] += 1
        return result

    def _rentals(self, *statuses: str) -> Any:
        from rentals.models import Rental

        return Rental.objects.filter(customer__in=self.customers, status__in=statuses)

    def maybe_cancel(self, rental_pk: int) -> None:
        """Right after a submit, now and then, cancel the order before a worker sends it."""
        from ops.services import ops_cancel
        from rentals.models import Rental

        if self.rng.random() < 0.03:
            rental = Rental.objects.get(pk=rental_pk)
            self._do("cancel", lambda: ops_cancel(rental=rental, actor=self.user, reason="chaos: changed my mind"))

    def pending(self) -> bool:
        """Tell whether terminations are still planned."""
        return bool(self.due)

    def tick(self) -> None:
        """Plan terminations for newly ready rentals, ask for those due, and maybe act at random."""
        from ops.services import ops_retry_now

        now = time.monotonic()
        if self.random_actions:  # after the final pass, no new terminations: the run is winding down
            for pk in self._rentals("ready").exclude(pk__in=self.decided).values_list("pk", flat=True):
                self.decided.add(pk)
                if self.rng.random() < self.terminate_share:
                    self.due.append((now + self.rng.uniform(0.5, 4.0), pk))
        for item in [item for item in self.due if item[0] <= now]:
            self.due.remove(item)
            self.terminate(item[1])
        if not self.random_actions or now < self.next_action:
            return
        self.next_action = now + self.rng.expovariate(1.0 / self.every)
        unknown = list(self._rentals("unknown"))
        waiting = list(self._rentals("retrying")) + unknown
        choices = (["retry"] if waiting else []) + (["reconcile", "reconcile"] if unknown else [])
        if not choices:
            return
        if self.rng.choice(choices) == "retry":
            rental = self.rng.choice(waiting)
            self._do("retry now", lambda: ops_retry_now(rental=rental, actor=self.user, reason="chaos: try again"))
        else:
            self.reconcile(self.rng.choice(unknown), confirm_chance=0.6)

    def terminate(self, rental_pk: int) -> None:
        """Ask to remove the rental's cluster (the delete itself runs in a worker)."""
        from ops.services import ops_terminate
        from rentals.models import Rental

        rental = Rental.objects.get(pk=rental_pk)
        self._do("terminate", lambda: ops_terminate(rental=rental, actor=self.user, reason="chaos: done with it"))

    def reconcile(self, rental: Any, *, confirm_chance: float = 1.0) -> None:
        """Reconcile one outcome-unknown rental, then (maybe) confirm what was found."""
        from django.utils import timezone

        from ops.selectors import latest_finding
        from ops.services import ops_confirm_reconciliation, ops_reconcile

        said = self._do("reconcile", lambda: ops_reconcile(rental=rental, actor=self.user, reason="chaos: look"))
        # As the ops page does: the confirmation offers what the latest finding on the timeline says.
        event = latest_finding(rental=rental) if said is not None else None
        if event is None:
            return
        result, cluster_ids = event.data.get("result"), list(event.data.get("cluster_ids") or [])
        self.counts[f"finding {result}"] += 1
        if self.rng.random() >= confirm_chance:
            return
        quiet = rental.last_sent_at is None or timezone.now() - rental.last_sent_at >= QUIET_BEFORE_NOT_RENTED
        if result == "match" and len(cluster_ids) == 1:
            cluster_id = cluster_ids[0]
        elif result == "no_match" and quiet:
            cluster_id = None
        else:
            return
        self._do(
            "confirm",
            lambda: ops_confirm_reconciliation(
                rental=rental, actor=self.user, cluster_id=cluster_id, reason="chaos: per the reconciliation"
            ),
        )

    def work_unknown(self, budget: float) -> int:
        """Work through the outcome-unknown rentals until none is left or `budget` seconds pass; return how
        many are left. One reconciliation a second at most: each is a pod listing, and the upstream allows
        about 60 a minute per account, shared with the engine's own poller."""
        self.random_actions = False  # from now on only this queue; a replay now would unsettle the run
        deadline = time.monotonic() + budget
        looked: dict[int, float] = {}
        while True:
            now = time.monotonic()
            unknown = list(self._rentals("unknown"))
            if not unknown or now > deadline:
                return len(unknown)
            due = [r for r in unknown if now - looked.get(r.pk, -1e9) >= 6.0]
            if due:
                rental = min(due, key=lambda r: looked.get(r.pk, -1e9))
                looked[rental.pk] = now
                self.reconcile(rental)
            time.sleep(1.0)


# --- The run -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the chaos run; print the verdict and, last, one JSON line. Exit 0, 1 on a finding, 2 on set-up."""
    run = begin_run(parse_args(argv))
    try:
        broker = start_broker(run)
        if broker is None:
            return 2
        child_env = start_django(run, broker, prepare_database(run))
        sims, skipped = start_simulators(run, child_env)
        people = create_people(run, sims)
        workers = start_workers(run, child_env)
        drill = make_postgres_drill(run, child_env, people)
        storm = Storm(run, broker, people, workers, make_operator(run, people), make_releases(run, people), drill)
        storm.run()
        findings = compare(storm.rental_ids, sims)
        result = verdict(run, findings, storm)
        run.ok = report(run, broker, findings, storm, result, skipped)
        print(json.dumps(result), flush=True)
        return 0 if run.ok else 1
    except KeyboardInterrupt:
        say("interrupted; stopping every process this run started")
        return 130
    finally:
        end_run(run)


@dataclass
class ChaosRun:
    """One chaos run: its options, random stream, folder and children, and what to undo at the end."""

    args: argparse.Namespace
    rng: random.Random
    run_dir: Path
    procs: Processes
    started: float = field(default_factory=time.monotonic)
    scratch: ScratchPostgres | None = None
    private_pg: PrivatePostgres | None = None  # --restart-postgres: the cluster the run owns
    cleanup_rows: Callable[[], None] | None = None
    ok: bool = False

    @property
    def adversarial(self) -> bool:
        """The lying upstream and the operator: the adversarial and shared-account profiles."""
        return bool(self.args.profile in ("adversarial", "shared-account"))

    @property
    def shared(self) -> bool:
        """Several customers on one credential and one simulator, pod names from a small pool."""
        return bool(self.args.profile == "shared-account")


@dataclass
class Broker:
    """The run's broker: its kind (embedded or redis), its URL, and the private Redis when there is one."""

    kind: str
    url: str
    redis: Redis | None = None


@dataclass
class People:
    """Who rents (one customer and credential per simulator, with its offers) and the operator's user."""

    user: Any
    tenants: list[tuple[Any, Any, Offers]]
    operator_user: Any = None
    members: dict[int, Any] = field(default_factory=dict)  # customer pk -> its own user (shared-account)

    @property
    def customers(self) -> list[Any]:
        return [customer for customer, _, _ in self.tenants]

    def user_for(self, customer: Any) -> Any:
        """Return the user who rents for `customer`."""
        return self.members.get(customer.pk, self.user)


def begin_run(args: argparse.Namespace) -> ChaosRun:
    """Make the run folder and its process list; a SIGTERM stops the run as Ctrl-C does."""
    run_dir = Path(args.run_dir).resolve() if args.run_dir else Path(tempfile.mkdtemp(prefix="chaos-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)  # noqa: S311 - reproducible chaos, not crypto
    interrupt_on(signal.SIGTERM)
    return ChaosRun(args=args, rng=rng, run_dir=run_dir, procs=Processes(run_dir))


def start_broker(run: ChaosRun) -> Broker | None:
    """Choose the broker and start a private Redis when asked for one; None when Redis cannot be had."""
    given = os.environ.get("CELERY_BROKER_URL", "")
    kind = run.args.broker
    if kind == "auto":
        kind = "redis" if given.startswith(("redis://", "rediss://")) else "embedded"
        if run.args.restart_postgres and shutil.which("redis-server"):
            kind = "redis"  # the database drill is the production stack's: PostgreSQL and Redis
    if kind != "redis":
        return Broker(kind, "filesystem://")
    binary = shutil.which("redis-server") or next(
        (path for path in ("/usr/bin/redis-server", "/usr/local/bin/redis-server") if Path(path).exists()), ""
    )
    if binary:
        redis = Redis(run.procs, binary)
        redis.start()
        return Broker(kind, redis.url, redis)
    if given.startswith(("redis://", "rediss://")):
        say(f"note: no redis-server binary; using {given} as is and skipping the Redis restart")
        return Broker(kind, given)
    say("error: --broker redis needs a redis-server binary or CELERY_BROKER_URL=redis://...")
    return None


def prepare_database(run: ChaosRun) -> str:
    """Return the run's database URL: SQLite in the run folder, a scratch PostgreSQL database, or as given."""
    db_url: str = run.args.database_url
    if run.args.restart_postgres:
        if db_url:
            say(f"note: --restart-postgres runs on a PostgreSQL of its own; {db_url.split('@')[-1]} is not used")
        run.private_pg = PrivatePostgres(run.run_dir)
        run.private_pg.create()
        say(f"postgres: a cluster of the run's own on port {run.private_pg.port} ({run.private_pg.dir})")
        return run.private_pg.url
    if not db_url:
        return f"sqlite:///{run.run_dir / 'db.sqlite3'}"
    if db_url.startswith(("postgres://", "postgresql://")) and not run.args.database_as_is:
        run.scratch = ScratchPostgres(db_url, f"chaos_{run.args.seed}_{os.getpid()}")
        run.scratch.create()
        return run.scratch.url
    return db_url


def start_django(run: ChaosRun, broker: Broker, db_url: str) -> dict[str, str]:
    """Set the environment of this process and every child, set Django up and migrate; return the children's."""
    for name, value in FAST_ENV.items():
        os.environ.setdefault(name, value)  # a knob set in the environment wins
    os.environ.update(
        {
            "RUN_DIR": str(run.run_dir),
            "DATABASE_URL": db_url,
            "CELERY_BROKER_URL": broker.url,
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "PYTHONUNBUFFERED": "1",
        }
    )
    child_env = {**os.environ, "LOG_LEVEL": "INFO"}
    # This process only submits and reads: keep its console for the progress lines (an enqueue that
    # fails while Redis restarts is expected and recovered by the sweeper).
    os.environ["LOG_LEVEL"] = "ERROR"
    django_setup_and_migrate()
    from django.db import connection

    if broker.kind == "embedded":
        say(f"broker: embedded file-system transport in {run.run_dir / 'broker'}")
    else:
        say(f"broker: {broker.url}" + (" (private redis-server, restarted once mid-run)" if broker.redis else ""))
    say(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    say(f"run folder: {run.run_dir}   seed: {run.args.seed}   profile: {run.args.profile}")
    return child_env


def start_simulators(run: ChaosRun, child_env: dict[str, str]) -> tuple[list[Simulator], dict[str, str]]:
    """Start the simulator (and, adversarial, the one that ignores Idempotency-Key) with their faults.

    Return the simulators and {fault: the simulator's reason} for the faults it does not know.
    """
    args = run.args
    fabrics = 8
    nodes_per_fabric = max(32, min(128, args.rentals * 4 // fabrics))
    if run.shared:
        # Orders take the first free nodes of two fabrics and the simulator adds a node for each one rented, so
        # 32 suffice; a shorter listing keeps the fresh read before every order cheap.
        nodes_per_fabric = 32
    sims = [
        Simulator(
            run.procs,
            name="simulator",
            seed=args.seed,
            fabrics=fabrics,
            nodes_per_fabric=nodes_per_fabric,
            faults=fault_rules(args.seed, args.fault_scale, args.outcome_unknown),
            env=child_env,
        )
    ]
    # Shared-account: one simulator behind one credential for every customer, so no second upstream.
    if run.adversarial and not run.shared and args.unhonoured_share > 0:
        # A second upstream that ignores Idempotency-Key, with its own credential and customer: the
        # engine caches "/version promises idempotency" per credential, so no cache entry crosses over.
        sims.append(
            Simulator(
                run.procs,
                name="simulator-unhonoured",
                seed=args.seed + 1,
                fabrics=fabrics,
                nodes_per_fabric=max(32, nodes_per_fabric // 2),
                faults=fault_rules(args.seed + 1, args.fault_scale, args.outcome_unknown),
                env=child_env,
            )
        )
    skipped: dict[str, str] = {}
    for sim in sims:
        sim.start()
        # The run tests the engine, not the account's money: thousands of clusters would drain the demo balance,
        # and the simulator then removes every pod, as Lium does.
        refusal = sim.set_config({"balances": {SIM_ACCOUNT: CHAOS_BALANCE_USD}})
        if args.verify_every > 0:  # verified rentals' checks reach the pods over SSH
            refusal = refusal or sim.set_config({"ssh": True})
        if refusal:
            say(f"note: the simulator kept its balance ({refusal[:200]}); a long run may drain it")
        if run.adversarial:
            rules = adversarial_rules(sim.seed or 0, args.fault_scale, args.outcome_unknown)
            skipped.update(sim.set_faults(rules))
    if len(sims) > 1:
        refusal = sims[1].set_config({"honour_idempotency_key": False, "features": ["rent_by_spec"]})
        if refusal:
            say("note: the simulator does not know honour_idempotency_key=false; every rental goes to the")
            say("      idempotent simulator, so no rental meets an upstream that rents twice")
            say(f"      (it says: {refusal[:200]})")
            sims.pop().control.close()
    describe_simulators(run, sims, skipped)
    return sims, skipped


def describe_simulators(run: ChaosRun, sims: list[Simulator], skipped: dict[str, str]) -> None:
    """Say which faults the run goes without, and where each simulator listens with which faults."""
    args = run.args
    if skipped:
        names = ", ".join(repr(name) for name in sorted(skipped))
        first = skipped[min(skipped)]
        say(f"note: the simulator does not know fault(s) {names}; the run goes on without them")
        say(f"      (it says: {first[:200]})")
    if run.adversarial:
        rules = adversarial_rules(args.seed, args.fault_scale, args.outcome_unknown)["rules"]
    else:
        rules = fault_rules(args.seed, args.fault_scale, args.outcome_unknown)["rules"]
    say(
        f"simulator: {sims[0].url} ({sims[0].fabrics} fabrics x {sims[0].nodes_per_fabric} nodes, replenished), "
        "faults: " + ", ".join(f"{r['fault']} {r['probability']:.0%}" for r in rules if r["fault"] not in skipped)
    )
    if len(sims) > 1:
        say(f"simulator without idempotency: {sims[1].url}, {args.unhonoured_share:.0%} of the rentals")
    if run.shared:
        say(
            f"shared account: {args.customers} customers on one credential, pod names train-1..train-{args.pod_names},"
            f" the first free nodes of {CONTESTED_FABRICS} fabrics"
        )


def create_people(run: ChaosRun, sims: list[Simulator]) -> People:
    """Create the renting user, one customer and credential per simulator, and (adversarial) the operator."""
    from django.contrib.auth.models import Group, User

    from accounts.models import Customer, Membership, UpstreamCredential
    from accounts.roles import OPERATOR_GROUP

    tag = f"chaos-{run.args.seed}-{os.getpid()}"
    user = User.objects.create_user(tag, f"{tag}@example.invalid", None)
    if run.shared:
        people = shared_account_people(run, sims[0], tag, user)
    else:
        tenants = []
        for index, sim in enumerate(sims):
            name = tag if index == 0 else f"{tag}-{index}"
            credential = UpstreamCredential(name=name, base_url=f"{sim.url}/api")
            credential.set_secret(SIM_KEY)
            credential.save()
            customer = Customer.objects.create(name=name, customer_ref=name, default_credential=credential)
            Membership.objects.create(user=user, customer=customer)
            tenants.append((customer, credential, Offers(sim.url, run.rng)))
        people = People(user=user, tenants=tenants)
    if run.adversarial:
        people.operator_user = User.objects.create_user(f"{tag}-operator", f"{tag}-operator@example.invalid", None)
        people.operator_user.groups.add(Group.objects.get_or_create(name=OPERATOR_GROUP)[0])
    if run.args.database_url and run.args.database_as_is:
        run.cleanup_rows = partial(delete_rows, people)
    return people


def shared_account_people(run: ChaosRun, sim: Simulator, tag: str, user: Any) -> People:
    """Create --customers customers (each with its own user and X-Customer-Ref) on ONE credential, all picking
    nodes from one listing of the same few fabrics."""
    from django.contrib.auth.models import User

    from accounts.models import Customer, Membership, UpstreamCredential

    credential = UpstreamCredential(name=f"{tag}-shared", base_url=f"{sim.url}/api")
    credential.set_secret(SIM_KEY)
    credential.save()
    people = People(user=user, tenants=[])
    offers = ContestedOffers(sim.url, run.rng, fabrics=CONTESTED_FABRICS, waiting=partial(queued_nodes, people))
    for index in range(run.args.customers):
        name = f"{tag}-c{index}"
        customer = Customer.objects.create(name=name, customer_ref=name, default_credential=credential)
        member = user if index == 0 else User.objects.create_user(name, f"{name}@example.invalid", None)
        Membership.objects.create(user=member, customer=customer)
        people.members[customer.pk] = member
        people.tenants.append((customer, credential, offers))
    return people


def queued_nodes(people: People) -> set[str]:
    """Return the nodes of the run's orders that no worker has sent yet."""
    from rentals.models import Rental

    rows = Rental.objects.filter(customer__in=people.customers, status="queued").values_list("executor_ids", flat=True)
    return {str(node) for nodes in rows for node in nodes or []}


def delete_rows(people: People) -> None:
    """Delete every row this run made (on a database used as is)."""
    from accounts.models import Membership
    from rentals.models import Heartbeat, Rental

    Rental.objects.filter(customer__in=people.customers).delete()
    credentials = {credential.pk: credential for _, credential, _ in people.tenants}  # shared-account: one
    for customer, _, _ in people.tenants:
        Membership.objects.filter(customer=customer).delete()
        customer.delete()
    for credential in credentials.values():
        Heartbeat.objects.filter(name=f"pods:{credential.pk}").delete()
        credential.delete()
    for member in {people.user, *people.members.values()}:
        member.delete()
    if people.operator_user is not None:
        people.operator_user.delete()


def start_workers(run: ChaosRun, child_env: dict[str, str]) -> Workers:
    """Start `--workers` celery workers (worker 0 runs beat)."""
    args = run.args
    workers = Workers(run.procs, count=args.workers, concurrency=args.concurrency, env=child_env, run_dir=run.run_dir)
    workers.start_all()
    say(f"workers: {args.workers} x concurrency {args.concurrency} (worker 0 runs beat)")
    return workers


SIM_ACCOUNT = "acct-main"  # the account of the simulator's demo key (SIM_KEY)
CHAOS_BALANCE_USD = 1e9


class Releases:
    """Customers done with their clusters: each rental that becomes ready is terminated by its customer `after`
    seconds later, through the customer's own path (`rentals.services.rental_terminate`).

    A marketplace that runs for long holds a bounded number of clusters; a soak that never released any would
    hold every one at once (a pod listing past the client's cap, then a balance the simulator drains).
    """

    def __init__(self, *, user: Any, customers: list[Any], after: float) -> None:
        self.user = user
        self.customers = customers
        self.after = after
        self.seen: set[int] = set()
        self.due: deque[tuple[float, int]] = deque()  # (monotonic time, rental pk), in time order
        self.counts: Counter[str] = Counter()

    def tick(self, *, winding_down: bool) -> None:
        """Plan the release of newly ready rentals (not once the run winds down), then ask for those due."""
        from django.core.exceptions import ValidationError

        from rentals.models import Rental
        from rentals.services import rental_terminate

        now = time.monotonic()
        if not winding_down:
            # The ready set stays small (released rentals leave it); the ids seen grow with the run.
            ready = Rental.objects.filter(customer__in=self.customers, status="ready").values_list("pk", flat=True)
            for pk in sorted(set(ready) - self.seen):
                self.seen.add(pk)
                self.due.append((now + self.after, pk))
        while self.due and self.due[0][0] <= now:
            rental = Rental.objects.get(pk=self.due.popleft()[1])
            try:
                asked = rental_terminate(rental=rental, actor=self.user, reason="chaos: the job is done")
            except ValidationError:  # its cluster id is not known (a member lost): it stays as it is
                asked = False
            self.counts["released" if asked else "not released"] += 1


def make_releases(run: ChaosRun, people: People) -> Releases | None:
    """Return the customers' releases when --release-after asks for them."""
    if run.args.release_after <= 0:
        return None
    return Releases(user=people.user, customers=people.customers, after=run.args.release_after)


def make_operator(run: ChaosRun, people: People) -> Operator | None:
    """Return the operator at work (adversarial profile only)."""
    if not run.adversarial:
        return None
    return Operator(
        user=people.operator_user,
        customers=people.customers,
        rng=random.Random(run.args.seed + 2),  # noqa: S311 - its own stream: the standard draws stay as they were
        every=run.args.operator_every,
        terminate_share=run.args.terminate_share,
    )


# --restart-postgres: each outage lasts this many seconds (drawn), and the web's answers are judged by these.
OUTAGE_SECONDS = (2.5, 5.0)
WEB_OUTAGE_ANSWER_SECONDS = 10.0  # a 503 slower than this is a hang (the web waits DB_POOL_TIMEOUT_SECONDS=3)
WEB_RECOVERY_SECONDS = 30.0  # the same page is served again within this long after the server is back
WEB_DB_POOL_TIMEOUT_SECONDS = "3"


class PostgresDrill:
    """Stops and starts the run's own PostgreSQL `count` times while rentals are in flight (fast and immediate
    shutdowns in turn), and asks a web server for a signed-in page during and after each outage: during it the
    page must answer 503 with Retry-After within WEB_OUTAGE_ANSWER_SECONDS, after it 200 again, the web server
    never restarted."""

    def __init__(self, *, pg: PrivatePostgres, page_url: str, cookies: dict[str, str], rng: random.Random, count: int):
        self.pg = pg
        self.page_url = page_url
        self.cookies = cookies
        self.rng = rng
        self.count = count
        self.planned: list[float] = []
        self.restarts = 0
        self.web_not_503 = 0
        self.web_not_recovered = 0
        self.down_seconds: list[float] = []
        self.outage_answers: list[float] = []  # seconds each probe during an outage took
        self.recovery_seconds: list[float] = []  # from the server's start to the page's first 200

    def plan(self, window: float) -> None:
        """Spread the restarts over the submission window (rentals are in flight all through it)."""
        start = time.monotonic()
        self.planned = [start + window * (i + 1) / (self.count + 1) for i in range(self.count)]

    def due(self, now: float) -> bool:
        return bool(self.planned) and now >= self.planned[0]

    def probe(self) -> tuple[int, str, float]:
        """GET the page; return (status or 0 when no answer came, its Retry-After, seconds taken)."""
        import httpx

        began = time.monotonic()
        try:
            answer = httpx.get(self.page_url, cookies=self.cookies, timeout=WEB_OUTAGE_ANSWER_SECONDS + 5)
        except httpx.HTTPError:
            return 0, "", time.monotonic() - began
        return answer.status_code, answer.headers.get("Retry-After", ""), time.monotonic() - began

    def outage(self, started: float) -> None:
        """One outage: stop the server, probe the page while it is down, start it, wait for the page's 200."""
        from django.db import connections

        self.planned.pop(0)
        connections.close_all()  # this process's own connection goes back to its pool before the server goes
        mode = "immediate" if self.restarts % 2 else "fast"
        down_at = time.monotonic()
        self.pg.stop(mode)
        length = self.rng.uniform(*OUTAGE_SECONDS)
        while True:
            status, retry_after, took = self.probe()
            self.outage_answers.append(took)
            if status != 503 or not retry_after or took > WEB_OUTAGE_ANSWER_SECONDS:
                self.web_not_503 += 1
                say(f"    web during the outage: {status or 'no answer'} (Retry-After {retry_after!r}) in {took:.1f}s")
            if time.monotonic() - down_at >= length:
                break
            time.sleep(0.5)
        self.pg.start()
        back_at = time.monotonic()
        self.down_seconds.append(back_at - down_at)
        while (status := self.probe()[0]) != 200 and time.monotonic() - back_at < WEB_RECOVERY_SECONDS:
            time.sleep(0.5)
        if status == 200:
            self.recovery_seconds.append(time.monotonic() - back_at)
        else:
            self.web_not_recovered += 1
            say(f"    web still answers {status or 'nothing'} {WEB_RECOVERY_SECONDS:g}s after PostgreSQL came back")
        connections.close_all()
        self.restarts += 1
        say(
            f"[{elapsed(started)}] PostgreSQL restarted ({mode} stop, down {self.down_seconds[-1]:.1f}s; "
            f"restart {self.restarts} of {self.count})"
        )

    def summary(self) -> str:
        answers = f"{len(self.outage_answers)} probes, slowest {max(self.outage_answers, default=0):.1f}s"
        recovered = f"200 again within {max(self.recovery_seconds, default=0):.1f}s"
        return (
            f"{self.restarts} (down {sum(self.down_seconds):.1f}s in all); web during outages: {answers}, "
            f"{self.web_not_503} not a 503 with Retry-After; after: {recovered}, {self.web_not_recovered} never"
        )


def make_postgres_drill(run: ChaosRun, child_env: dict[str, str], people: People) -> PostgresDrill | None:
    """With --restart-postgres: start the web server (gunicorn, as deployed) and sign the renting user in."""
    if not run.args.restart_postgres or run.private_pg is None:
        return None
    from django.conf import settings
    from django.test import Client

    port = free_port()
    web_env = {**child_env, "DEBUG": "false", "DB_POOL_TIMEOUT_SECONDS": WEB_DB_POOL_TIMEOUT_SECONDS}
    args = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "--bind", f"127.0.0.1:{port}"]
    process = run.procs.start([*args, "--workers", "1", "dashboard.wsgi"], log_name="web.log", env=web_env)
    wait_for_http(f"http://127.0.0.1:{port}/healthz", process=process, timeout=60)
    client = Client()
    client.force_login(people.user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    say(f"web: gunicorn on 127.0.0.1:{port}, probed at /rentals/ during each PostgreSQL outage")
    return PostgresDrill(
        pg=run.private_pg,
        page_url=f"http://127.0.0.1:{port}/rentals/",
        cookies=cookies,
        rng=random.Random(run.args.seed + 4),  # noqa: S311 - its own stream: the standard draws stay as they were
        count=run.args.restart_postgres,
    )


class Storm:
    """The run's middle: submit rentals at the set rate, SIGKILL workers at random moments, restart Redis
    once, let the operator act, until every rental has settled or the time is up."""

    def __init__(
        self,
        run: ChaosRun,
        broker: Broker,
        people: People,
        workers: Workers,
        operator: Operator | None,
        releases: Releases | None = None,
        drill: PostgresDrill | None = None,
    ) -> None:
        args = run.args
        self.started = run.started
        self.run_dir = run.run_dir
        self.args = args
        self.rng = run.rng
        self.people = people
        self.workers = workers
        self.operator = operator
        self.releases = releases
        self.redis = broker.redis
        self.rental_ids: list[int] = []  # -1 for a submit that failed
        self.submit_errors = 0
        self.submit_interval = 1.0 / args.submit_rate if args.submit_rate > 0 else 0.0
        self.next_submit = time.monotonic()
        self.planned = self.plan_kills()
        self.next_kill = self.planned.pop(0) if self.planned else float("inf")
        self.redis_restart_at = max(1, args.rentals // 2) if self.redis else None
        self.redis_down_seconds = 0.0
        self.deadline = time.monotonic() + args.timeout
        self.last_progress = 0.0
        self.counts: Counter[str] = Counter()
        self.crashed_restarts = 0
        self.operator_worked_unknown = False
        self.route_rng = random.Random(args.seed + 3)  # noqa: S311
        self.shared = run.shared
        self.drill = drill
        if drill is not None:
            window = args.rentals / args.submit_rate if args.submit_rate > 0 else 5.0
            drill.plan(window)

    def plan_kills(self) -> list[float]:
        """Plan the first --min-kills kills inside the submission window, so even a run whose rentals settle
        as fast as they arrive has its workers killed while it works."""
        args = self.args
        if args.kill_every <= 0:
            return []
        submit_window = args.rentals / args.submit_rate if args.submit_rate > 0 else 5.0
        spacing = max(1.0, 0.8 * submit_window / max(1, args.min_kills))
        return [
            time.monotonic() + 1.0 + i * spacing + self.rng.uniform(0, spacing * 0.8) for i in range(args.min_kills)
        ]

    def run(self) -> None:
        say(
            f"submitting {self.args.rentals} rentals at {self.args.submit_rate:g}/s; "
            f"SIGKILL a worker every ~{self.args.kill_every:g}s"
        )
        while self.step():
            pass

    def step(self) -> bool:
        """Take one turn: submit, count, disturb, report; return False once the run is over."""
        now = time.monotonic()
        self.submit_due(now)
        settled, in_flight = self.census()
        all_submitted = len(self.rental_ids) >= self.args.rentals
        if now >= self.next_kill and (in_flight > 0 or not all_submitted):
            self.kill_one(all_submitted)
        if self.drill is not None and self.drill.due(now):
            say(f"[{elapsed(self.started)}] stopping PostgreSQL ({in_flight} rentals in flight)")
            self.drill.outage(self.started)
        self.restart_crashed()
        if self.operator is not None:
            self.operator.tick()
        if self.releases is not None:
            self.releases.tick(winding_down=all_submitted)
        if now - self.last_progress >= 3:
            self.last_progress = now
            self.show_progress(settled, in_flight)
        # Restarts still planned keep the run going (each happens at once when nothing is left in flight).
        quiet = all_submitted and in_flight == 0 and (self.drill is None or not self.drill.planned)
        operator = self.operator
        if quiet and operator is not None and not operator.pending() and not self.operator_worked_unknown:
            # Everything settled: the operator works the outcome-unknown queue, then the loop waits for
            # what that (and the terminations) set moving.
            say(
                f"[{elapsed(self.started)}] the operator works through {self.counts['unknown']} outcome-unknown rentals"
            )
            self.operator_worked_unknown = True
            operator.work_unknown(min(FINAL_PASS_SECONDS, self.deadline - time.monotonic()))
            return True
        if quiet and (operator is None or not operator.pending()):
            return False  # nothing left to disturb (terminations still planned: the operator asks for them first)
        if now > self.deadline:
            say(f"[{elapsed(self.started)}] timeout: {in_flight} rentals still in flight")
            return False
        time.sleep(0.2 if not all_submitted else 0.5)
        return True

    def submit_due(self, now: float) -> None:
        """Submit every rental whose time has come; restart Redis once half of them are in."""
        while len(self.rental_ids) < self.args.rentals and now >= self.next_submit:
            if not self.submit_one(len(self.rental_ids)):
                say("no free nodes left; waiting for the simulator to replenish")
                self.next_submit = now + 1
                break
            self.next_submit += self.submit_interval
            restart_due = self.redis_restart_at is not None and len(self.rental_ids) >= self.redis_restart_at
            if self.redis is not None and restart_due:
                say(f"[{elapsed(self.started)}] restarting Redis (SIGKILL, then start on port {self.redis.port})")
                self.redis_down_seconds = self.redis.restart()
                self.redis_restart_at = None

    def submit_one(self, index: int) -> bool:
        """Submit rental `index` on free nodes through `rental_submit`; False when no nodes are free."""
        from rentals.fabric_check.keys import check_key_generate
        from rentals.fabric_check.parse import link_rate_parse
        from rentals.orders.order import RentOrder
        from rentals.services import rental_submit
        from rentals.verification.records import UNSTATED_LINK_RATE_GBPS, CheckPlan

        customer, credential, offers = self.people.tenants[self.pick_tenant()]
        size = self.rng.choice(SHARED_SIZES if self.shared else SIZES)
        picked = offers.pick(size) or offers.pick(2)
        if picked is None:
            return False
        fabric_id, nodes = picked
        # Shared-account: names from a small pool, as teams name their jobs; otherwise one name per rental.
        pod_name = f"train-{self.route_rng.randrange(self.args.pod_names) + 1}" if self.shared else f"chaos-{index:04d}"
        every = self.args.verify_every
        link_rate = link_rate_parse(offers.link_rates.get(fabric_id)) or UNSTATED_LINK_RATE_GBPS
        check = CheckPlan(key=check_key_generate(), link_rate_gbps=link_rate) if every and index % every == 0 else None
        order = RentOrder(
            fabric_id=fabric_id,
            executor_ids=[node["id"] for node in nodes],
            pod_name=pod_name,
            public_keys=[SSH_KEY, check.key.public_line] if check else [SSH_KEY],
            gpu_type=str(nodes[0].get("gpu_type") or ""),
            gpus_per_node=int(nodes[0].get("gpu_count") or 0),
        )
        try:
            rental = rental_submit(
                user=self.people.user_for(customer),
                customer=customer,
                order=order,
                customer_ref=customer.customer_ref,
                credential=credential,
                check=check,
            )
        except Exception as exc:
            self.submit_errors += 1
            say(f"submit {index} failed: {type(exc).__name__}: {exc}")
            self.rental_ids.append(-1)
        else:
            self.rental_ids.append(rental.pk)
            if self.operator is not None:
                self.operator.maybe_cancel(rental.pk)
        return True

    def pick_tenant(self) -> int:
        """Return the index of the customer who orders next."""
        if self.shared:
            return self.route_rng.randrange(len(self.people.tenants))
        if len(self.people.tenants) > 1 and self.route_rng.random() < self.args.unhonoured_share:
            return 1
        return 0

    def census(self) -> tuple[int, int]:
        """Count this run's rentals per state; return how many have settled and how many are in flight."""
        from django.db.models import Count

        from rentals.models import Rental

        self.counts = Counter(
            dict(
                Rental.objects.filter(customer__in=self.people.customers)
                .order_by()
                .values_list("status")
                .annotate(n=Count("id"))
                .values_list("status", "n")
            )
        )
        settled = sum(self.counts[state] for state in SETTLED_STATES)
        return settled, len([pk for pk in self.rental_ids if pk > 0]) - settled

    def kill_one(self, all_submitted: bool) -> None:
        """SIGKILL a random worker, start its replacement (now or a little later), and plan the next kill."""
        rng, workers = self.rng, self.workers
        slot = rng.randrange(len(workers.slots))
        workers.kill(slot)
        if rng.random() < 0.5:
            time.sleep(rng.uniform(0.2, 2.0))  # sometimes leave the fleet one short for a while
        workers.start(slot)
        say(
            f"[{elapsed(self.started)}] SIGKILLed worker {slot}{' (beat)' if slot == 0 else ''}, "
            f"started a replacement (kill {workers.kills})"
        )
        if self.planned:
            self.next_kill = max(self.planned.pop(0), time.monotonic() + 1.0)
            return
        kill_every = self.args.kill_every
        gap = rng.expovariate(1.0 / kill_every)
        if workers.kills < self.args.min_kills and all_submitted:
            gap = min(gap, 2.0)
        self.next_kill = time.monotonic() + max(1.0, min(gap, 3 * kill_every))

    def restart_crashed(self) -> None:
        """Restart the workers that exited by themselves, and show the end of their logs."""
        crashed = self.workers.check_alive()
        if not crashed:
            return
        self.crashed_restarts += len(crashed)
        say(f"[{elapsed(self.started)}] worker(s) {crashed} exited by themselves; restarted. Last lines:")
        for slot in crashed:
            lines = (self.run_dir / f"worker-{slot}.log").read_text(errors="replace").splitlines()
            for line in lines[-8:]:
                say(f"    worker-{slot}: {line[:200]}")

    def show_progress(self, settled: int, in_flight: int) -> None:
        shown = ", ".join(f"{state} {n}" for state, n in sorted(self.counts.items()))
        say(
            f"[{elapsed(self.started)}] submitted {len(self.rental_ids)}/{self.args.rentals}  "
            f"settled {settled}  in flight {in_flight}  kills {self.workers.kills}  | {shown}"
        )


# --- The comparison and the verdict ----------------------------------------------------------------------


@dataclass
class Findings:
    """What the comparison found, with what it was read from (for the explanations)."""

    audit: Audit
    rentals: list[Any]
    ledger: list[dict[str, Any]]
    requests_log: list[dict[str, Any]]
    delete_calls: list[dict[str, Any]] | None
    attempts: int
    classes: Counter[str]


def judge_verification(found: Audit, rentals: list[Any], views: list[RentalView]) -> None:
    """Issue 27: a verified rental's state says what its check found, and no check that ended keeps its key."""
    from rentals.models import FabricCheck, RentalEvent

    checks = {check.rental_id: check for check in FabricCheck.objects.filter(rental__in=rentals)}
    passed_to_ready = set(
        RentalEvent.objects.filter(rental__in=rentals, from_status="verifying", to_status="ready").values_list(
            "rental_id", flat=True
        )
    )
    by_pk = {view.pk: view for view in views}
    for rental in rentals:
        check = checks.get(rental.pk)
        view = by_pk[rental.pk]
        if (check is None) == rental.verify_fabric:
            found.problems["untruthful"].append((view, "verify_fabric and its fabric check disagree"))
        if check is None:
            continue
        if rental.status == "check_failed" and check.status not in ("failed", "error"):
            found.problems["untruthful"].append((view, f"check_failed but its check {check.status}"))
        if rental.pk in passed_to_ready and check.status != "passed":
            found.problems["untruthful"].append((view, f"ready after verifying but its check {check.status}"))
        if check.status not in ("pending", "running") and (check.private_key_encrypted or check.keys_removed is False):
            found.problems["untruthful"].append((view, "the check ended but its key was kept or left on a member"))


def compare(rental_ids: list[int], sims: list[Simulator]) -> Findings:
    """Read every rental of the run and every simulator's records (faults off), and audit them."""
    from rentals.models import ClusterMember, Rental, RentAttempt

    rentals = list(Rental.objects.filter(pk__in=[pk for pk in rental_ids if pk > 0]))
    reused_attempts = set(
        RentAttempt.objects.filter(rental__in=rentals, error_code="idempotency_key_reused").values_list(
            "rental_id", flat=True
        )
    )
    pods_held: dict[int, set[str]] = defaultdict(set)
    for rental_id, pod_id in ClusterMember.objects.filter(rental__in=rentals).values_list("rental_id", "pod_id"):
        pods_held[rental_id].add(str(pod_id))
    views = [
        RentalView(
            pk=r.pk,
            pod_name=r.pod_name,
            idempotency_key=str(r.idempotency_key),
            status=r.status,
            cluster_id=r.cluster_id or "",
            attempt_count=r.attempt_count,
            key_reused_answer=r.pk in reused_attempts,
            pod_ids=tuple(sorted(pods_held[r.pk] | {str(pod) for pod in r.pod_ids or []})),
            executor_ids=tuple(str(node) for node in r.executor_ids or []),
        )
        for r in rentals
    ]
    ledger: list[dict[str, Any]] = []
    requests_log: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] | None = []
    delete_calls: list[dict[str, Any]] | None = []
    for sim in sims:
        ledger += sim.ledger()
        requests_log += sim.requests()
        logged = sim.delete_calls()
        delete_calls = None if delete_calls is None or logged is None else delete_calls + logged
        # The pod list is read honestly: faults off first (the run is over, nothing is in flight).
        sim.clear_faults()
        listed = sim.pods()
        pods = None if pods is None or listed is None else pods + listed
    found = audit(views, ledger, requests_log, pods, delete_calls)
    judge_verification(found, rentals, views)
    return Findings(
        audit=found,
        rentals=rentals,
        ledger=ledger,
        requests_log=requests_log,
        delete_calls=delete_calls,
        attempts=RentAttempt.objects.filter(rental__in=rentals).count(),
        classes=Counter(RentAttempt.objects.filter(rental__in=rentals).values_list("classification", flat=True)),
    )


def verdict(run: ChaosRun, findings: Findings, storm: Storm) -> dict[str, Any]:
    """Return the JSON verdict: every count a reader or CI checks."""
    found, final_counts = findings.audit, findings.audit.final_counts
    return {
        "profile": run.args.profile,
        "rentals": run.args.rentals,
        "settled": sum(final_counts[s] for s in SETTLED_STATES),
        "duplicates": found.count("duplicates"),
        "lost": found.count("lost") + storm.submit_errors,
        "untruthful": found.count("untruthful"),
        "key_reused": found.count("key_reused"),
        "unknown_with_cluster": len(found.unknown_with_cluster),
        "unknown": final_counts["unknown"],
        "clusters_claimed_twice": found.count("clusters_claimed_twice"),
        "cross_tenant": found.count("cross_tenant"),
        "unknown_with_cluster_unrivalled": len(found.unknown_unrivalled),
        "delete_calls_max_per_rental": found.delete_calls_max_per_rental,
        "attempts": findings.attempts,
        "worker_kills": storm.workers.kills,
        "postgres_restarts": storm.drill.restarts if storm.drill else 0,
        "web_not_503": storm.drill.web_not_503 if storm.drill else 0,
        "web_not_recovered": storm.drill.web_not_recovered if storm.drill else 0,
        "seconds": round(time.monotonic() - run.started, 1),
    }


# A count above 0 fails every profile.
FAILING_COUNTS = (
    "duplicates",
    "lost",
    "untruthful",
    "key_reused",
    "clusters_claimed_twice",
    "cross_tenant",
    "web_not_503",
    "web_not_recovered",
)


def report(
    run: ChaosRun, broker: Broker, findings: Findings, storm: Storm, result: dict[str, Any], skipped: dict[str, str]
) -> bool:
    """Print the verdict for a person, explain the first bad rentals; return whether the run passed."""
    from django.db import connection

    args = run.args
    say("")
    say("=" * 72)
    say(
        f"chaos run ({args.profile}), seed {args.seed}: {args.rentals} rentals, {args.workers} workers x "
        f"{args.concurrency}, broker {broker.kind}, database {connection.vendor}"
    )
    rows = report_rows(run, findings, storm, result, skipped)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        say(f"  {name:<{width}}  {value}")
    operator = storm.operator
    if operator is not None and operator.unexpected:
        say(f"  note: {len(operator.unexpected)} operator action(s) raised unexpected errors, e.g.:")
        for line in operator.unexpected[:3]:
            say(f"    {line}")
    explain(findings, bad_rentals(run, findings.audit)[: args.explain])
    worker_errors = 0
    for log_path in sorted(run.run_dir.glob("worker-*.log")):
        worker_errors += log_path.read_text(errors="replace").count("raised unexpected")
    if worker_errors:
        say(f"  note: {worker_errors} task(s) raised unexpected errors; see {run.run_dir}/worker-*.log")
    ok = not any(result[count] for count in FAILING_COUNTS)
    if result["postgres_restarts"] < args.restart_postgres:
        say(f"  note: PostgreSQL was restarted {result['postgres_restarts']} times, not {args.restart_postgres}")
        ok = False
    # Shared-account: a cluster two orders match stays `unknown` by design; one only this rental matches must not.
    if run.adversarial and result["unknown_with_cluster_unrivalled" if run.shared else "unknown_with_cluster"]:
        ok = False
    say("=" * 72)
    if not ok or args.keep:
        say(f"run folder kept: {run.run_dir} (worker-*.log, simulator*.log, db)")
    return ok


def report_rows(
    run: ChaosRun, findings: Findings, storm: Storm, result: dict[str, Any], skipped: dict[str, str]
) -> list[tuple[str, str]]:
    """Return the report's (label, value) lines."""
    found, final_counts = findings.audit, findings.audit.final_counts
    deletes = found.delete_calls_max_per_rental
    attempts = f"{findings.attempts} ({', '.join(f'{c} {n}' for c, n in sorted(findings.classes.items()))})"
    rows = [
        ("final states", ", ".join(f"{s} {n}" for s, n in sorted(final_counts.items()))),
        ("attempts", attempts),
        ("rent calls seen upstream", str(found.rent_calls)),
        ("clusters in the ledger", f"{len(findings.ledger)} (foreign: {len(found.foreign)})"),
        (
            "unknown with a cluster",
            f"{len(found.unknown_with_cluster)} of {final_counts['unknown']}"
            + ("" if run.adversarial else " (reconciliation would find it)"),
        ),
        (
            "deletes per rental, most",
            str(deletes) if deletes is not None else "not known (this simulator logs only rent calls)",
        ),
        ("pods checked", "yes (terminated and ready against live pods)" if found.pods_checked else "no"),
        (
            "worker kills",
            f"{storm.workers.kills} SIGKILL ({storm.workers.beat_kills} of the beat worker); "
            f"{storm.crashed_restarts} exited by themselves",
        ),
        ("redis restarts", f"1 (down {storm.redis_down_seconds:.1f}s)" if storm.redis_down_seconds else "0"),
        ("postgres restarts", storm.drill.summary() if storm.drill else "0"),
        ("submit errors", str(storm.submit_errors)),
    ]
    if storm.releases is not None:
        counts = storm.releases.counts
        rows.append(("customers' releases", f"{counts['released']} asked, {counts['not released']} refused"))
    if storm.operator is not None:
        sims = 1 if run.shared else len(storm.people.tenants)
        rows += [
            ("operator actions", ", ".join(f"{k} {n}" for k, n in sorted(storm.operator.counts.items())) or "none"),
            ("faults left out", ", ".join(sorted(skipped)) or "none"),
            ("upstreams", f"{sims} ({'one ignores' if sims > 1 else 'none ignores'} Idempotency-Key)"),
        ]
    if run.shared:
        rows.append(
            (
                "shared account",
                f"{len(storm.people.tenants)} customers on one credential; unknown with a cluster only they match: "
                f"{result['unknown_with_cluster_unrivalled']}",
            )
        )
    rows += [
        (
            "duplicates / lost / untruthful / key_reused",
            f"{result['duplicates']} / {result['lost']} / {result['untruthful']} / {result['key_reused']}",
        ),
        ("clusters claimed twice / cross-tenant", f"{result['clusters_claimed_twice']} / {result['cross_tenant']}"),
        ("seconds", str(result["seconds"])),
    ]
    return rows


def bad_rentals(run: ChaosRun, found: Audit) -> list[tuple[str, RentalView | None, str]]:
    """Return every problem as (kind, rental or None, why), the adversarial unknowns with a cluster last."""
    bad = [(kind, subject, why) for kind in FAILING_COUNTS for subject, why in found.problems[kind]]
    if run.adversarial:
        bad += [
            ("unknown_with_cluster", rental, "unknown, but the ledger has its cluster")
            for rental in (found.unknown_unrivalled if run.shared else found.unknown_with_cluster)
        ]
    return bad


def explain(findings: Findings, bad: list[tuple[str, RentalView | None, str]]) -> None:
    """Print each bad rental's attempts, events and upstream calls."""
    from rentals.models import RentalEvent, RentAttempt

    for kind, subject, why in bad:
        say("")
        if subject is None:
            say(f"  {kind}: {why}")
            continue
        say(f"  {kind}: rental {subject.pk} {subject.pod_name} key {subject.idempotency_key}: {why}")
        for attempt in RentAttempt.objects.filter(rental_id=subject.pk).order_by("number"):
            say(
                f"    attempt {attempt.number} {attempt.started_at:%H:%M:%S.%f} {attempt.duration_ms}ms "
                f"http {attempt.http_status} {attempt.classification} {attempt.error_code} "
                f"replayed={attempt.replayed} {attempt.request_id} {attempt.message[:80]}"
            )
        for event in RentalEvent.objects.filter(rental_id=subject.pk).order_by("at", "id"):
            say(
                f"    event {event.at:%H:%M:%S.%f} {event.from_status or '-'} -> {event.to_status or '-'}: "
                f"{event.message[:100]}"
            )
        for entry in findings.requests_log + (findings.delete_calls or []):
            mine = entry.get("idempotency_key") == subject.idempotency_key
            if mine or (subject.cluster_id and delete_call_cluster(entry) == subject.cluster_id):
                say(
                    f"    upstream {entry.get('sim')} {entry.get('at')} {entry.get('request_id')} "
                    f"{entry.get('route', 'rent')} status {entry.get('status')} "
                    f"replayed={entry.get('replayed')} dropped={entry.get('dropped')}"
                )


def end_run(run: ChaosRun) -> None:
    """Stop every child, delete this run's rows or drop its scratch database, remove a passed run's folder."""
    run.procs.stop_all()
    if run.private_pg is not None:
        from django.db import connections

        connections.close_all()
        run.private_pg.destroy()
    try:
        if run.cleanup_rows is not None:
            run.cleanup_rows()
    except Exception as exc:
        say(f"note: could not delete this run's rows: {exc}")
    if run.scratch is not None:
        try:
            from django.db import connections

            connections.close_all()
            run.scratch.drop()
        except Exception as exc:
            say(f"note: could not drop scratch database {run.scratch.name}: {exc}")
    if run.ok and not run.args.keep and not run.args.run_dir:
        shutil.rmtree(run.run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
