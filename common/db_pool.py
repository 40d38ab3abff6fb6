"""Check a pooled PostgreSQL connection before it is lent, with a round trip only when the server has spoken.

After PostgreSQL restarts, every connection a pool holds is dead, and a request or task given one would fail.
psycopg's own check (what Django's CONN_HEALTH_CHECKS turns on for a pool) makes a round trip on every loan: about
a tenth of a millisecond of CPU on every poll (bench/README.md). A server that ends
a connection (restart, failover, `pg_terminate_backend`, idle timeout) sends its reason and closes the socket,
which then reads as ready: only then is the round trip made, and a dead connection replaced by the pool.
"""

from __future__ import annotations

import select

import psycopg
from psycopg_pool import ConnectionPool


def pooled_connection_check(conn: psycopg.Connection) -> None:
    """Raise when `conn` is dead (the pool then opens another); a connection with nothing to read costs nothing."""
    # poll, not select: a process with hundreds of threads holds sockets numbered past select's 1024.
    waiting = select.poll()
    waiting.register(conn.fileno(), select.POLLIN)
    if waiting.poll(0):
        ConnectionPool.check_connection(conn)
