"""Fixtures for the rent engine's unit tests: a fake upstream at the transport and small engine settings. The
enqueue recorder (`enqueued`), the hand-moved clock (`clock`) and `make_rental` are the root conftest's, shared
with the other folders. Nothing here sleeps or opens a socket.

No `__init__.py` in this folder on purpose: a `tests/rentals` package would shadow the `rentals` app.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from rentals import upstream
from tests.rentals.fakes import FakeUpstream


@pytest.fixture
def promising_backend(fake_upstream: FakeUpstream) -> FakeUpstream:
    """The scripted upstream's `GET /version` lists rent_idempotency: a possibly-sent order may be re-sent."""
    fake_upstream.features = ["rent_idempotency"]
    return fake_upstream


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
