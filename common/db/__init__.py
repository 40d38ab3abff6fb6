"""The database connection outside any one app: the SQLite backend (`common.db.sqlite3`), and giving a thread's
connection back."""

from django.db import connection


def db_connection_release() -> None:
    """Give this thread's database connection back before a long wait (a pooled one returns to the pool):
    hundreds of rent threads must not each hold one while they wait on Lium."""
    # SQLite is a file: a connection costs nothing to keep, and closing one may checkpoint the WAL.
    if connection.vendor != "sqlite" and not connection.in_atomic_block:
        connection.close()
