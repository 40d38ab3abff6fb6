"""Fixtures for the JSON API: keys for personas, and a plain httpx client against the live server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest


@pytest.fixture(autouse=True)
def _generous_request_budget(settings) -> None:  # type: ignore[no-untyped-def]
    """Polls and the fuzz run send many requests; the budget itself is tested on its own."""
    settings.API_RATE_PER_MINUTE = 100_000


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Failed-auth counters and cached offers must not leak between tests (the live server shares the cache)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def make_key() -> Callable[..., str]:
    """Return a function that creates an API key for a user and returns its full text."""
    from api.keys import api_key_create

    def make(user, scopes=("read", "rent", "manage"), **kwargs) -> str:  # type: ignore[no-untyped-def]
        _key, text = api_key_create(user=user, name=f"{user.username} key", scopes=list(scopes), **kwargs)
        return text

    return make


@pytest.fixture
def api_client(live_server) -> Iterator[Callable[..., httpx.Client]]:  # type: ignore[no-untyped-def]
    """Return a function making a plain httpx client for the live server's API with a key (or none)."""
    clients: list[httpx.Client] = []

    def make(key: str | None = None, *, bearer: bool = False) -> httpx.Client:
        headers = {}
        if key is not None:
            headers = {"Authorization": f"Bearer {key}"} if bearer else {"X-API-Key": key}
        client = httpx.Client(base_url=f"{live_server.url}/api/v1", headers=headers, timeout=30.0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
