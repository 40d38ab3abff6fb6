"""The backup/restore drill's rentals, run inside the stack's web container by scripts/backup_restore_drill.sh:

    docker compose exec -T -e DRILL_STEP=<step> -e LIUM_API_KEY web \\
        python manage.py shell -c "$(cat scripts/drill_rentals.py)"

DRILL_STEP=real      with the workers up: rentals through the simulator (ready, ready, terminated by an operator),
                     a webhook endpoint (so every transition writes a delivery), a support read (an audit row),
                     then one more rental held in the simulator's rent call (the script then kills the rent
                     worker: the upstream commits it while the database still says `sending`).
DRILL_STEP=inserted  with the workers stopped: the other states through the ORM. queued, sending (an expired
                     lease) and retrying on real free nodes, so the restored stack really sends them; refused,
                     failed, not_rented, cancelled, unknown, rented, verifying, check_failed, degraded, terminating
                     with made-up nodes and clusters, and scheduled a day ahead (their rows are what the backup
                     must bring back; the scheduled one must still be waiting).
DRILL_STEP=judge     after the restore, with the stack up again: every rental in flight at the backup settles, and
                     on what the simulator's ledger says (a held cluster: exactly the one the ledger has for its
                     key; nothing rented: none); no key was rented twice; the real ready rentals are still ready.

The last line of each step is one JSON object.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
from django.contrib.auth.models import Group, User
from django.utils import timezone

from accounts.audit import support_read_record
from accounts.models import Customer
from accounts.roles import SUPPORT_GROUP
from notifications.models import Delivery, Event, WebhookEndpoint
from ops.services import ops_terminate
from rentals.models import Rental, RentAttempt
from rentals.orders.order import RentOrder
from rentals.services import rental_submit

SIM = os.environ["LIUM_BASE_URL"].removesuffix("/api")
KEY = os.environ.get("LIUM_API_KEY", "sim-demo-key")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ drill@ci"
REAL_READY = ("drill-ready-1", "drill-ready-2")
# In flight when the backup is taken: the restored stack must carry each on to a state the ledger agrees with.
IN_FLIGHT = ("drill-held", "drill-queued", "drill-sending", "drill-retrying")
HOLDS = ("rented", "verifying", "check_failed", "ready", "degraded")
NOTHING = ("refused", "failed", "not_rented", "cancelled")
SETTLED = (*HOLDS, *NOTHING, "unknown", "terminated")
INSERTED_SETTLED = (
    "refused",
    "failed",
    "not_rented",
    "cancelled",
    "unknown",
    "rented",
    "verifying",
    "check_failed",
    "degraded",
    "terminating",
    "scheduled",  # a day ahead: it must come back still waiting for its time
)


def say(message: str) -> None:
    print(f"drill_rentals: {message}", flush=True)


def customer() -> Customer:
    return Customer.objects.get(customer_ref="acme")


def free_pairs(count: int, used: set[str]) -> list[tuple[str, list[str]]]:
    """Return `count` (fabric, 2 free whole nodes) pairs the simulator offers, none of them in `used`."""
    offers = httpx.get(f"{SIM}/api/executors/infiniband-clusters", headers={"X-API-Key": KEY}, timeout=20).json()
    pairs: list[tuple[str, list[str]]] = []
    for offer in offers:
        nodes = [n["id"] for n in offer.get("nodes", []) if n["id"] not in used]
        while len(nodes) >= 2 and len(pairs) < count:
            pair, nodes = nodes[:2], nodes[2:]
            used.update(pair)
            pairs.append((offer["fabric_id"], pair))
    if len(pairs) < count:
        raise SystemExit(f"drill_rentals: the simulator offers only {len(pairs)} free node pairs")
    return pairs


def used_nodes() -> set[str]:
    return {str(node) for nodes in Rental.objects.values_list("executor_ids", flat=True) for node in nodes or []}


def submit(pod_name: str, fabric: str, nodes: list[str]) -> Rental:
    """Order a cluster as the rent form does (the row, its key and bytes, its first message)."""
    order = RentOrder(fabric_id=fabric, executor_ids=nodes, pod_name=pod_name, public_keys=[SSH_KEY])
    alice = User.objects.get(username="alice")
    return rental_submit(user=alice, customer=customer(), order=order, customer_ref="acme")


def wait_for(pod_names: tuple[str, ...], states: tuple[str, ...], seconds: float) -> dict[str, str]:
    """Wait until every named rental is in one of `states`; return {pod name: status} as last read."""
    deadline = time.monotonic() + seconds
    while True:
        found = dict(Rental.objects.filter(pod_name__in=pod_names).values_list("pod_name", "status"))
        if all(found.get(name) in states for name in pod_names) or time.monotonic() > deadline:
            return found
        time.sleep(2)


def step_real() -> dict[str, Any]:
    """Rentals through the simulator, with the workers up."""
    endpoint = WebhookEndpoint(customer=customer(), url="https://hooks.drill.invalid/lium", events=["*"])
    endpoint.set_secret("whsec_" + uuid.uuid4().hex)
    endpoint.save()
    names = (*REAL_READY, "drill-terminated")
    for name, (fabric, nodes) in zip(names, free_pairs(len(names), used_nodes()), strict=True):
        submit(name, fabric, nodes)
    found = wait_for(names, ("ready",), 240)
    if any(found.get(name) != "ready" for name in names):
        raise SystemExit(f"drill_rentals: not ready in time: {found}")
    olga = User.objects.get(username="olga")
    ops_terminate(rental=Rental.objects.get(pod_name="drill-terminated"), actor=olga, reason="drill: done with it")
    wait_for(("drill-terminated",), ("terminated",), 120)
    sam, _ = User.objects.get_or_create(username="drill-support")
    sam.groups.add(Group.objects.get_or_create(name=SUPPORT_GROUP)[0])
    support_read_record(user=sam, customer_ids=[customer().pk], what="drill: the usage page")
    # The next rent call is held 25 s in the simulator: the rent worker is killed meanwhile, so the upstream
    # commits while the database still says `sending`.
    httpx.post(
        f"{SIM}/_sim/faults",
        json={"seed": 1, "rules": [{"fault": "slow_commit", "next": 1, "seconds": 25}]},
        timeout=10,
    ).raise_for_status()
    (fabric, nodes) = free_pairs(1, used_nodes())[0]
    submit("drill-held", fabric, nodes)
    wait_for(("drill-held",), ("sending",), 60)
    return states()


def step_inserted() -> dict[str, Any]:
    """The other states, through the ORM, with the workers stopped."""
    now = timezone.now()
    for name, (fabric, nodes) in zip(
        ("drill-queued", "drill-sending", "drill-retrying"), free_pairs(3, used_nodes()), strict=True
    ):
        submit(name, fabric, nodes)
    window = {"first_sent_at": now, "last_sent_at": now, "retry_until": now + timedelta(hours=23), "attempt_count": 1}
    Rental.objects.filter(pod_name="drill-sending").update(
        status="sending", lease_until=now - timedelta(minutes=1), lease_token=uuid.uuid4(), **window
    )
    Rental.objects.filter(pod_name="drill-retrying").update(status="retrying", next_attempt_at=now, **window)
    attempt(Rental.objects.get(pod_name="drill-retrying"), "inconclusive", 503)
    for n, status in enumerate(INSERTED_SETTLED):
        rental = submit(f"drill-{status.replace('_', '-')}", "drill-fabric", [f"drill-node-{n}a", f"drill-node-{n}b"])
        fields: dict[str, Any] = {"status": status, **window}
        if status == "scheduled":
            fields = {"status": status, "start_at": now + timedelta(days=1)}
        if status in (*HOLDS, "terminating"):
            fields |= {"cluster_id": f"drill-cluster-{n}", "pod_ids": [f"drill-pod-{n}a", f"drill-pod-{n}b"]}
            fields |= {"rented_at": now}
        Rental.objects.filter(pk=rental.pk).update(**fields)
        if status != "scheduled":  # never sent yet
            attempt(rental, "refused" if status == "refused" else "confirmed", 409 if status == "refused" else 200)
    if not Delivery.objects.exists():  # the endpoint above makes one per transition; never leave the table empty
        event = Event.objects.create(type="rental.ready", customer=customer(), body="{}", created_at=now)
        Delivery.objects.create(event=event, kind="webhook", endpoint=WebhookEndpoint.objects.first(), give_up_at=now)
    return states()


def attempt(rental: Rental, classification: str, http_status: int) -> None:
    RentAttempt.objects.create(
        rental=rental,
        number=rental.attempts.count() + 1,
        started_at=timezone.now(),
        duration_ms=120,
        http_status=http_status,
        classification=classification,
        request_id=f"req_drill_{uuid.uuid4().hex[:12]}",
    )


def states() -> dict[str, Any]:
    rows = Rental.objects.filter(pod_name__startswith="drill-")
    return {
        "states": dict(rows.values_list("pod_name", "status")),
        "distinct": sorted(set(rows.values_list("status", flat=True))),
    }


def step_judge() -> dict[str, Any]:
    """After the restore: the rentals in flight settle on what the upstream did; nothing was rented twice."""
    found = wait_for(IN_FLIGHT, tuple(s for s in SETTLED if s != "rented"), 300)
    body = httpx.get(f"{SIM}/_sim/ledger", timeout=20).json()
    ledger = body["ledger"] if isinstance(body, dict) else body
    problems: list[str] = []
    for rental in Rental.objects.filter(pod_name__in=(*IN_FLIGHT, *REAL_READY)):
        entries = [e for e in ledger if str(e.get("idempotency_key")) == str(rental.idempotency_key)]
        clusters = {str(e.get("cluster_id")) for e in entries}
        if len(entries) > 1:
            problems.append(f"{rental.pod_name}: rented {len(entries)} times under one key")
        if rental.status not in SETTLED or rental.status == "rented":
            problems.append(f"{rental.pod_name}: still {rental.status}")
        elif rental.status in HOLDS and clusters != {rental.cluster_id}:
            problems.append(f"{rental.pod_name}: {rental.status} as {rental.cluster_id!r}, the ledger has {clusters}")
        elif rental.status in NOTHING and clusters:
            problems.append(f"{rental.pod_name}: {rental.status}, yet the ledger has {clusters}")
        if rental.pod_name in REAL_READY and rental.status != "ready":
            problems.append(f"{rental.pod_name}: was ready at the backup, now {rental.status}")
    waiting = Rental.objects.filter(pod_name="drill-scheduled").values_list("status", flat=True).first()
    if waiting != "scheduled":
        problems.append(f"drill-scheduled: was waiting for its time a day ahead, now {waiting}")
    result = {"in_flight_then": list(IN_FLIGHT), "now": found, "problems": problems, **states()}
    if problems:
        print(json.dumps(result), flush=True)
        raise SystemExit(1)
    return result


STEPS = {"real": step_real, "inserted": step_inserted, "judge": step_judge}
print(json.dumps(STEPS[os.environ["DRILL_STEP"]]()), flush=True)
