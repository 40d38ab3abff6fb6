"""Fixtures of the web tests."""

from __future__ import annotations

import pytest

from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY


@pytest.fixture
def rental(alice, acme, monkeypatch: pytest.MonkeyPatch) -> Rental:  # type: ignore[no-untyped-def]
    """Alice's queued order (no worker picks it up)."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name="job", public_keys=[SSH_KEY])
    return rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
