"""A database that is gone for a moment (PostgreSQL restarting, failing over) answers 503 with Retry-After on
pages and in the API, not a 500, and the next request after it returns is served as usual, without a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from django.db import InterfaceError, OperationalError
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def database_gone(error: Exception) -> Iterator[None]:
    """Every query fails as it does while the server is down (the connection refused or cut)."""
    with mock.patch("django.db.backends.utils.CursorWrapper.execute", side_effect=error):
        yield


def session_fails(error: Exception) -> mock._patch:  # type: ignore[type-arg]
    """Reading the session (which the authentication middleware does before any view) raises `error`."""
    from django.contrib.sessions.backends.base import SessionBase

    return mock.patch.object(SessionBase, "_session", new_callable=mock.PropertyMock, side_effect=error)


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
    ],
)
def test_a_page_answers_503_with_retry_after_while_the_database_is_gone_then_recovers(alice, error) -> None:
    client = Client()
    client.force_login(alice)
    with database_gone(error):
        response = client.get("/rentals/")
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert "try again" in response.content.decode().lower()
    # The database is back: the same page is served, no restart in between.
    assert client.get("/rentals/").status_code == 200


def test_a_failure_outside_a_view_is_a_503_too(alice, settings) -> None:
    """Django's 500 handler sees what no view did (a middleware's query): a lost database is a 503 there too."""
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    with session_fails(OperationalError("could not connect to server: Connection refused")):
        response = client.get("/rentals/")
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0


def test_any_other_error_is_still_a_500(alice, settings) -> None:
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    with session_fails(RuntimeError("a defect")):
        response = client.get("/rentals/")
    assert response.status_code == 500


def test_the_api_answers_503_in_its_envelope_while_the_database_is_gone(alice) -> None:
    from api.keys import api_key_create

    _row, key = api_key_create(user=alice, name="outage", scopes=["read"])
    client = Client()
    with database_gone(OperationalError("terminating connection due to administrator command")):
        response = client.get("/api/v1/rentals", headers={"X-API-Key": key})
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    body = response.json()
    assert body["error"]["code"] == "database_unavailable"
    assert "try again" in body["error"]["hint"].lower()
    assert client.get("/api/v1/rentals", headers={"X-API-Key": key}).status_code == 200


def postgres_settings(**env: str) -> dict[str, object]:
    """Return the default database's settings as a process with DATABASE_URL on PostgreSQL reads them."""
    code = (
        "import json; from dashboard import settings as s; d = s.DATABASES['default']; "
        "print(json.dumps({'checks': d.get('CONN_HEALTH_CHECKS'), 'pool': d.get('OPTIONS', {}).get('pool'),"
        " 'max_age': d.get('CONN_MAX_AGE')}, default=lambda f: f.__module__ + '.' + f.__name__))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_dead_connection_is_dropped_before_use_and_the_wait_for_one_is_bounded_by_a_setting() -> None:
    """After a restart every pooled connection is dead: the pool checks each before lending it
    (`common.db_pool`, tested in test_pooled_connection_check.py), so a task never fails on one; unpooled, Django's
    CONN_HEALTH_CHECKS does. DB_POOL_TIMEOUT_SECONDS bounds how long a request waits for a connection while the
    server is down (the web process sets it short: a quick 503, not a hang)."""
    pooled = postgres_settings()
    assert isinstance(pooled["pool"], dict) and pooled["pool"]["timeout"] == 30
    assert pooled["pool"]["check"] == "common.db_pool.pooled_connection_check"
    assert postgres_settings(DB_POOL_TIMEOUT_SECONDS="3")["pool"]["timeout"] == 3  # type: ignore[index]
    unpooled = postgres_settings(DB_POOL_MAX_SIZE="0", DB_CONN_MAX_AGE="60")
    assert unpooled["checks"] is True and unpooled["max_age"] == 60
