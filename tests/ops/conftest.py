"""Fixtures for the staff pages: rentals made straight in the database, and Celery enqueues recorded.

No `__init__.py` in this folder on purpose: a `tests/ops` package would shadow the `ops` app.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from itertools import count
from typing import Any

import pytest

from rentals.models import Rental, RentalNode

_numbers = count(1)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):  # type: ignore[no-untyped-def]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[object, ...]]]:
    """Record Celery enqueues instead of sending them to a broker."""
    calls: list[tuple[str, tuple[object, ...]]] = []

    def record(task_name: str, *args: object, countdown: float | None = None) -> None:
        calls.append((task_name, args))

    monkeypatch.setattr("rentals.enqueue._enqueue", record)
    return calls


@pytest.fixture
def make_rental(acme, alice, enqueued):  # type: ignore[no-untyped-def]
    """Create a rental row directly (no upstream call): any state, any fields."""

    def make(customer=None, *, executors: list[str] | None = None, **fields: Any) -> Rental:  # type: ignore[no-untyped-def]
        number = next(_numbers)
        customer = customer or acme
        executors = executors or [f"exec-{number}-a", f"exec-{number}-b"]
        body = json.dumps({"pod_name": f"train-{number}", "executor_uuids": executors}, sort_keys=True).encode()
        values: dict[str, Any] = {
            "created_by": alice if customer == acme else None,
            "customer": customer,
            "credential": customer.default_credential,
            "fabric_id": "fab-1",
            "executor_ids": executors,
            "pod_name": f"train-{number}",
            "customer_ref": customer.customer_ref,
            "idempotency_key": uuid.uuid4(),
            "request_body": body,
            "body_sha256": hashlib.sha256(body).hexdigest(),
            **fields,
        }
        rental = Rental.objects.create(**values)
        RentalNode.objects.bulk_create([RentalNode(rental=rental, executor_id=e) for e in executors])
        return rental

    return make
