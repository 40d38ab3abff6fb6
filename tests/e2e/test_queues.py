"""The three queues, with real workers started as the Procfile starts them: a flood of rent calls never delays
pod tracking."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings

from rentals.enqueue import CLUSTER_DELETE, FABRIC_CHECK, PODS_SYNC, RECONCILE_LOOK, REMOVAL_PUSH, RENTAL_SEND
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus
from tests.conftest import SSH_KEY, Simulator, _purge_broker, start_worker, stop_process


def test_each_task_is_routed_to_its_queue_by_name() -> None:
    router = current_app.amqp.router  # type: ignore[attr-defined]  # set once the app is configured; not in the stubs
    queue_of = {name: router.route({}, name)["queue"].name for name in settings.CELERY_TASK_ROUTES}
    assert queue_of[RENTAL_SEND] == "rent"
    assert queue_of[PODS_SYNC] == "tracking"
    assert queue_of[FABRIC_CHECK] == "fabric_check"  # a check holds SSH sessions for minutes (issue 27)
    for name in (CLUSTER_DELETE, RECONCILE_LOOK, REMOVAL_PUSH, "rentals.tasks.rentals_sweep"):
        assert queue_of[name] == "housekeeping"
    assert queue_of["notifications.tasks.delivery_send"] == "housekeeping"
    assert queue_of["presets.tasks.watches_scan"] == queue_of["presets.tasks.watch_demand_signal"] == "housekeeping"
    assert router.route({}, "some.unrouted.task")["queue"].name == "housekeeping"
    current_app.loader.import_default_modules()
    apps = ("rentals.", "notifications.", "billing.", "ops.", "presets.")
    ours = [name for name in current_app.tasks if name.startswith(apps)]
    assert sorted(ours) == sorted(settings.CELERY_TASK_ROUTES)  # a new task must be given its queue


@pytest.fixture
def queue_workers(transactional_db: None, tmp_path: Path) -> Iterator[None]:
    """One worker per queue, as in the Procfile, but a rent worker of 2 threads: easy to flood."""
    _purge_broker()
    workers = [
        start_worker(queues="rent", concurrency=2, beat=False, name="rent", log_path=tmp_path / "rent.log"),
        start_worker(queues="tracking", concurrency=4, beat=False, name="tracking", log_path=tmp_path / "tracking.log"),
        start_worker(
            queues="housekeeping,celery", concurrency=4, name="housekeeping", log_path=tmp_path / "housekeeping.log"
        ),
    ]
    try:
        yield
    finally:
        for worker in workers:
            stop_process(worker)
        for log in sorted(tmp_path.glob("*.log")):
            sys.stderr.write(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")


def rent(user, customer, name: str, fabric: str, nodes: list[str]) -> Rental:  # type: ignore[no-untyped-def]
    order = RentOrder(fabric_id=fabric, executor_ids=nodes, pod_name=name, public_keys=[SSH_KEY])
    return rental_submit(user=user, customer=customer, order=order, customer_ref=customer.customer_ref)


def wait_for(rental: Rental, statuses: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rental.refresh_from_db()
        if rental.status in statuses:
            break
        time.sleep(0.1)
    return rental.status


@pytest.mark.e2e
def test_a_flood_of_rent_calls_does_not_delay_pod_tracking(
    simulator: Simulator, queue_workers: None, alice, acme
) -> None:
    offers = simulator.offers()
    pairs = [(o["fabric_id"], [n["id"] for n in o["nodes"][i : i + 2]]) for o in offers for i in (0, 2, 4, 6)]
    pairs = [(fabric, ids) for fabric, ids in pairs if len(ids) == 2]
    simulator.http.post("/_sim/config", json={"start_seconds": 5}).raise_for_status()
    fabric, nodes = pairs[0]
    tracked = rent(alice, acme, "tracked", fabric, nodes)
    assert wait_for(tracked, {RentalStatus.RENTED, RentalStatus.READY}, timeout=30) == RentalStatus.RENTED

    # Every rent call now takes 4 s, and 2 threads send them: the rent queue holds a minute of work.
    simulator.faults([{"fault": "latency", "ms": 4000}])
    flood = [rent(alice, acme, f"flood-{i}", fabric, ["flood-a", "flood-b"]).pk for i in range(30)]

    # Its members start 5 s after the rent; the tracking worker polls every 1.5 s (tests' worker settings).
    assert wait_for(tracked, {RentalStatus.READY}, timeout=20) == RentalStatus.READY
    still_waiting = Rental.objects.filter(pk__in=flood, status__in=(RentalStatus.QUEUED, RentalStatus.SENDING)).count()
    # Ready while half the flood still waits to be sent: the tracking queue did not wait behind the rent queue
    # (counted in rentals, not seconds: a busy machine slows both alike).
    assert still_waiting >= 15, "the tracked rental became ready only once the flood was over"
    simulator.faults([])


def test_the_procfile_starts_one_worker_per_queue_with_the_threads_pool() -> None:
    sys.path.insert(0, str(settings.BASE_DIR))
    from scripts.harness import procfile_workers

    workers = procfile_workers({})
    queues = {name: args[args.index("-Q") + 1] for name, args in workers.items()}
    assert queues == {
        "worker-rent": "rent",
        "worker-tracking": "tracking",
        "worker-fabric-check": "fabric_check",
        "worker-housekeeping": "housekeeping,celery",
    }
    # No --pool: Celery's option takes only its own pool names, and the settings choose ours (common.celery_pool).
    assert not any(arg.startswith(("--pool", "-P")) for args in workers.values() for arg in args)
    assert [name for name, args in workers.items() if "--beat" in args] == ["worker-housekeeping"]
    rent = workers["worker-rent"]
    assert int(next(a for a in rent if a.startswith("--concurrency=")).split("=")[1]) >= 200  # a burst of 200 at once


@pytest.mark.e2e
@pytest.mark.skipif(
    settings.CELERY_BROKER_URL.startswith("filesystem://"),
    reason="the stall is in Celery's event loop, which only brokers like Redis use (run `make test` with Redis up)",
)
def test_a_worker_with_every_thread_busy_takes_the_next_message_as_soon_as_one_finishes(
    transactional_db: None, tmp_path: Path
) -> None:
    # One thread and prefetch 1: every message waits for the one before it to finish. With Celery's stock
    # threads pool the worker then noticed the free slot only at its event loop's next timer (up to 10 s each).
    _purge_broker()
    log = tmp_path / "worker.log"
    worker = start_worker(queues="housekeeping", concurrency=1, beat=False, log_path=log)
    try:
        deadline = time.monotonic() + 60
        while " ready." not in (log.read_text(errors="replace") if log.exists() else ""):
            assert time.monotonic() < deadline and worker.poll() is None, "the worker did not start"
            time.sleep(0.2)
        for _ in range(6):
            current_app.send_task("rentals.tasks.rentals_sweep")
        # Six sweeps of a few ms each; stalled, they took 30 s or more: 20 s is a generous margin on a busy machine.
        deadline = time.monotonic() + 20
        while log.read_text(errors="replace").count("] succeeded in") < 6 and time.monotonic() < deadline:
            time.sleep(0.2)
        text = log.read_text(errors="replace")
        assert text.count("] succeeded in") == 6, text[-2000:]
    finally:
        stop_process(worker)
