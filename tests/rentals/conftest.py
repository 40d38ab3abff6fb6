"""Fixtures for the rent engine's unit tests: a fake upstream at the transport, a recorder for Celery
enqueues and a clock that tests move by hand. Nothing here sleeps or opens a socket.

No `__init__.py` in this folder on purpose: a `tests/rentals` package would shadow the `rentals` app.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from rentals import upstream
from rentals.models import Rental
from rentals.ordering import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY
from tests.rentals.fakes import EXECUTORS, Clock, Enqueued, FakeUpstream


@pytest.fixture
def promising_backend(fake_upstream: FakeUpstream) -> FakeUpstream:
    """The scripted upstream's `GET /version` lists rent_idempotency: a possibly-sent order may be re-sent."""
    fake_upstream.features = ["rent_idempotency"]
    return fake_upstream


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):  # type: ignore[no-untyped-def]
    """The personas get passwords; hashing them properly would make every test take half a second."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fake_upstream(monkeypatch: pytest.MonkeyPatch) -> FakeUpstream:
    """Every `upstream.client_for(credential)` talks to this fake instead of the network."""
    fake = FakeUpstream()
    real_client_for = upstream.client_for

    def client_for(credential: Any, *, http: httpx.Client | None = None) -> upstream.LiumClient:
        return real_client_for(credential, http=http or httpx.Client(transport=httpx.MockTransport(fake.handle)))

    monkeypatch.setattr(upstream, "client_for", client_for)
    return fake


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> Enqueued:
    recorder = Enqueued()

    def record(task_name: str, *args: object, countdown: float | None = None) -> None:
        recorder.calls.append((task_name, args, countdown))

    monkeypatch.setattr("rentals.enqueue._enqueue", record)
    return recorder


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    moved = Clock(timezone.now().replace(microsecond=0))
    monkeypatch.setattr(timezone, "now", moved)
    yield moved


@pytest.fixture
def engine_settings(settings):  # type: ignore[no-untyped-def]
    """Small, explicit engine settings so the tests read without looking them up."""
    settings.RENT_MAX_ATTEMPTS = 5
    settings.RENT_BACKOFF_BASE_SECONDS = 2.0
    settings.RENT_BACKOFF_CAP_SECONDS = 60.0
    settings.RENT_RETRY_WINDOW = timedelta(hours=2)
    settings.RENT_LEASE_SECONDS = 60
    settings.RENT_QUEUED_STUCK_SECONDS = 30
    settings.POD_POLL_MIN_INTERVAL_SECONDS = 3.0
    return settings


@pytest.fixture
def make_rental(alice, acme, enqueued, engine_settings):  # type: ignore[no-untyped-def]
    """Submit a rental as alice for Acme (its first enqueue is recorded, not sent)."""

    def make(pod_name: str = "train-1", executors: list[str] | None = None, **fields: Any) -> Rental:
        order = RentOrder(
            fabric_id="fab-1", executor_ids=list(executors or EXECUTORS), pod_name=pod_name, public_keys=[SSH_KEY]
        )
        rental = rental_submit(user=alice, customer=acme, order=order, customer_ref=acme.customer_ref)
        if fields:
            Rental.objects.filter(pk=rental.pk).update(**fields)
            rental.refresh_from_db()
        return rental

    return make
