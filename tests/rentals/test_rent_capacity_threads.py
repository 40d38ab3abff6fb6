"""The engine under threads, as the `rent` worker runs it (Celery's threads pool): real concurrent claims and
records on the test database, a slow upstream, and an in-process queue standing in for the broker.

These tests commit (transactional_db): every thread opens its own connection to the same database file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.db import connection, transaction

from rentals import engine, upstream
from rentals.enqueue import RENTAL_SEND
from rentals.models import Rental
from rentals.ordering import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus
from tests.conftest import SSH_KEY
from tests.rentals.fakes import rented


class SlowUpstream:
    """Answers every rent with a confirmation after `latency` seconds; records when each call arrived and
    the most calls it ever held at once."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.arrived: dict[str, float] = {}
        self.open = 0
        self.peak = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        request.read()
        key = request.headers["Idempotency-Key"]
        with self.lock:
            self.arrived.setdefault(key, time.monotonic())
            self.open += 1
            self.peak = max(self.peak, self.open)
        time.sleep(self.latency)
        with self.lock:
            self.open -= 1
        return rented(pod_ids=[f"{key}-0", f"{key}-1"], cluster_id=f"cl-{key}")


class ThreadBroker:
    """Runs every `rental_send` enqueued on a pool of threads, as a threads-pool worker would; a task's
    connection is closed when it ends (Celery's Django fixup does the same)."""

    def __init__(self, threads: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=threads)
        self.errors: list[BaseException] = []

    def enqueue(self, task_name: str, *args: Any, countdown: float | None = None) -> None:
        if task_name == RENTAL_SEND:
            self.pool.submit(self.run, int(args[0]))  # type: ignore[call-overload]

    def run(self, rental_id: int) -> None:
        try:
            engine.rental_attempt(rental_id=rental_id)
        except BaseException as exc:
            self.errors.append(exc)
            raise
        finally:
            connection.close()


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadBroker]:
    threads = ThreadBroker(threads=160)
    monkeypatch.setattr("rentals.enqueue._enqueue", threads.enqueue)
    yield threads
    threads.pool.shutdown(wait=True)


def slow_upstream(monkeypatch: pytest.MonkeyPatch, latency: float) -> SlowUpstream:
    fake = SlowUpstream(latency)
    real_client_for = upstream.client_for

    def client_for(credential: Any, *, http: httpx.Client | None = None) -> upstream.LiumClient:
        return real_client_for(credential, http=http or httpx.Client(transport=httpx.MockTransport(fake.handle)))

    monkeypatch.setattr(upstream, "client_for", client_for)
    return fake


def submit(user: Any, customer: Any, name: str) -> Rental:
    order = RentOrder(fabric_id="fab-1", executor_ids=[f"{name}-a", f"{name}-b"], pod_name=name, public_keys=[SSH_KEY])
    return rental_submit(user=user, customer=customer, order=order, customer_ref=customer.customer_ref)


def wait_until_settled(rental_ids: list[int], timeout: float) -> int:
    """Wait until none of the rentals is queued or sending; return how many are still not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        open_ = Rental.objects.filter(
            pk__in=rental_ids, status__in=(RentalStatus.QUEUED, RentalStatus.SENDING, RentalStatus.RETRYING)
        ).count()
        if open_ == 0:
            return 0
        time.sleep(0.05)
    return open_


def test_a_burst_of_concurrent_claims_and_records_on_sqlite_never_meets_a_locked_database(
    transactional_db: None, alice, acme, broker: ThreadBroker, monkeypatch: pytest.MonkeyPatch, caplog, settings
) -> None:
    settings.RENT_LEASE_SECONDS = 60
    # Calls held 1 s: on a busy machine claims take turns slowly, and shorter calls would barely overlap.
    fake = slow_upstream(monkeypatch, latency=1.0)
    caplog.set_level(logging.WARNING)

    with transaction.atomic():  # every first message is enqueued at the commit: 120 threads claim at once
        ids = [submit(alice, acme, f"burst-{i}").pk for i in range(120)]
    started = time.monotonic()

    assert wait_until_settled(ids, timeout=90) == 0
    print(f"120 rentals settled in {time.monotonic() - started:.2f} s; peak {fake.peak} calls at once")
    assert broker.errors == []
    assert Rental.objects.filter(pk__in=ids, status=RentalStatus.RENTED).count() == 120
    assert len(fake.arrived) == 120
    # The calls really overlapped (one at a time would be 1): the threads claimed and recorded at the same time.
    assert fake.peak > 10
    assert not [r for r in caplog.records if "locked" in r.getMessage()]


def test_a_burst_of_one_customer_holds_another_customers_rental_back_by_at_most_one_call(
    transactional_db: None, alice, acme, bob, globex, broker: ThreadBroker, monkeypatch, settings
) -> None:
    latency = 0.4
    settings.RENT_INFLIGHT_PER_CREDENTIAL = 4
    settings.RENT_LEASE_SECONDS = 60
    fake = slow_upstream(monkeypatch, latency=latency)

    burst = [submit(alice, acme, f"acme-{i}").pk for i in range(100)]
    deadline = time.monotonic() + 10
    while len(fake.arrived) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    submitted = time.monotonic()
    single = submit(bob, globex, "globex-1")
    while single.idempotency_key.hex not in {k.replace("-", "") for k in fake.arrived} and time.monotonic() < deadline:
        time.sleep(0.005)
    waited = fake.arrived.get(str(single.idempotency_key), float("inf")) - submitted

    assert wait_until_settled([*burst, single.pk], timeout=60) == 0
    assert broker.errors == []
    assert fake.peak <= 4  # the cap held under 160 threads
    # The first slot that frees is Globex's: at most one call's latency, plus a claim and a dispatch. In the
    # order of arrival it would have waited for the 96 Acme rentals before it: 24 rounds of 0.4 s.
    assert waited <= latency + 0.3, f"Globex's rental waited {waited:.2f} s behind Acme's burst"
    assert Rental.objects.filter(pk__in=[*burst, single.pk], status=RentalStatus.RENTED).count() == 101
