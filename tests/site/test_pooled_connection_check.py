"""After PostgreSQL ends a connection (a restart, a failover, an administrator), the pool lends a new one, never
the dead one; a connection the server has said nothing on is lent without a round trip (the poll's figure).

Django 5.2's own backend cannot take this check (`common/db/postgresql/base.py`): with it these tests fail."""

from __future__ import annotations

import time
from unittest import mock

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _pooled() -> None:
    if connection.vendor != "postgresql" or getattr(connection, "pool", None) is None:
        pytest.skip("needs PostgreSQL with the pool: make test's PostgreSQL + Redis pass runs it")


def backend_pid() -> int:
    """Borrow a connection from the pool as a request does, and return the server process behind it."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])
    finally:
        connection.close()  # back to the pool, as at the end of a request


def test_a_connection_the_server_ended_is_replaced_before_it_is_lent() -> None:
    ended = backend_pid()
    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")}
    with psycopg.connect(**params, autocommit=True) as admin:  # type: ignore[arg-type]
        admin.execute("SELECT pg_terminate_backend(%s)", [ended])
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [ended]).fetchone():
            assert time.monotonic() < deadline, "the backend did not end"
            time.sleep(0.05)
    assert backend_pid() != ended, "the query ran on a live connection"


def test_a_live_quiet_connection_is_lent_without_a_round_trip() -> None:
    backend_pid()
    with mock.patch.object(ConnectionPool, "check_connection") as round_trip:
        backend_pid()
    round_trip.assert_not_called()


def test_a_connection_with_a_high_file_number_is_checked_without_error() -> None:
    """A rent worker's hundreds of threads hold many sockets, so a connection's file number passes 1024, which
    `select.select` refuses: the check must not fail every connection then (it made the pool time out: 503s)."""
    import os
    import resource

    from common.db_pool import pooled_connection_check

    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200:
        pytest.skip("needs at least 1,200 open files (ulimit -n)")
    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")}
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with psycopg.connect(**params, autocommit=True) as high:  # type: ignore[arg-type]
            assert high.fileno() > 1024
            pooled_connection_check(high)
            assert high.execute("SELECT 1").fetchone() == (1,)
    finally:
        for filler in fillers:
            os.close(filler)
