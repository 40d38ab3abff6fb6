"""The embedded SQLite backend (common/db/sqlite3): a process's second writer waits its turn on the process's lock,
never in SQLite's busy handler (which polls with sleeps of up to 100 ms while the lock sits free, and fails once its
timeout is spent). With SQLite's busy timeout at zero, Django's own backend fails the second writer at once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db.utils import ConnectionHandler

HOLD_SECONDS = 3  # how long the first writer keeps the lock while the second one tries: time to fail, if it will


def sqlite_connections(engine: str, path: Path) -> ConnectionHandler:
    """Connections (one per thread) to a database file, with SQLite's busy handler off (timeout 0)."""
    options = {"timeout": 0, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    return ConnectionHandler({"default": {"ENGINE": engine, "NAME": str(path), "OPTIONS": options}})


def write(
    connections: ConnectionHandler, value: str, *, hold: tuple[threading.Event, threading.Event] | None = None
) -> None:
    """One write transaction (as `transaction.atomic` opens it); with `hold` (holding, release): once written, set
    `holding` and keep the transaction open until `release` is set."""
    connection: Any = connections["default"]
    connection.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO note (text) VALUES (%s)", [value])
        if hold is not None:
            hold[0].set()
            hold[1].wait(timeout=30)
        connection.commit()
    finally:
        connection.set_autocommit(True)
        connection.close()


@pytest.mark.parametrize(
    ("engine", "second_writer_waits"),
    [("common.db.sqlite3", True), ("django.db.backends.sqlite3", False)],
)
def test_a_second_writer_of_the_process_waits_its_turn_instead_of_meeting_the_busy_handler(
    tmp_path: Path, engine: str, second_writer_waits: bool, django_db_blocker: Any
) -> None:
    with django_db_blocker.unblock():  # its own database file, not the tests' database
        two_writers(tmp_path / "turns.sqlite3", engine, second_writer_waits)


def two_writers(path: Path, engine: str, second_writer_waits: bool) -> None:
    connections = sqlite_connections(engine, path)
    with connections["default"].cursor() as cursor:
        cursor.execute("CREATE TABLE note (text TEXT)")
    connections["default"].close()
    first_holds, release, errors = threading.Event(), threading.Event(), []

    def first() -> None:
        write(connections, "first", hold=(first_holds, release))

    def second() -> None:
        try:
            write(connections, "second")
        except Exception as exc:  # the stock backend: "database is locked"
            errors.append(exc)

    holder = threading.Thread(target=first)
    holder.start()
    assert first_holds.wait(timeout=30)
    waiter = threading.Thread(target=second)
    waiter.start()
    waiter.join(timeout=HOLD_SECONDS)  # the stock backend fails at once; ours waits for the first to commit
    release.set()
    holder.join(timeout=30)
    waiter.join(timeout=30)
    assert not errors if second_writer_waits else errors
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT text FROM note ORDER BY text")
        stored = [row[0] for row in cursor.fetchall()]
    connections["default"].close()
    assert stored == (["first", "second"] if second_writer_waits else ["first"])
