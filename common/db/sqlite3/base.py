"""Django's SQLite backend, with this process's write transactions queued on a lock instead of SQLite's.

SQLite has one write lock per database. Threads that meet it held wait in SQLite's busy handler, which polls
with growing sleeps (up to 100 ms), so under a burst (the `rent` worker's hundreds of threads) the lock sits
free while its waiters sleep. Here a thread first takes a process-wide lock, handed over at once on release,
so within a process the write transactions follow one another without gaps; only other processes still meet
the busy handler (and its 30 s timeout). Transactions are IMMEDIATE (settings), so a transaction that holds
this lock holds SQLite's too, and one that does not never waits for it while holding it.

Works around SQLite's default busy handler, which Python's sqlite3 module gives no way to replace:
https://github.com/ghaering/pysqlite/issues/96 (closed unfixed). Django's own backend, with the busy handler off,
fails a second writer at once: `tests/site/test_sqlite_write_turn.py` shows both.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db.backends.sqlite3 import base

# Reentrant only to be safe: a thread's connection opens one transaction at a time (nested atomics are savepoints).
_WRITE_TURN = threading.RLock()


class DatabaseWrapper(base.DatabaseWrapper):
    """One thread's SQLite connection; its transactions take the process's write turn first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._holds_turn = False

    def _start_transaction_under_autocommit(self) -> None:
        _WRITE_TURN.acquire()
        self._holds_turn = True
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private, not in the stubs
        except BaseException:
            self._release_turn()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]
        finally:
            self._release_turn()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._release_turn()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            self._release_turn()

    def _release_turn(self) -> None:
        if self._holds_turn:
            self._holds_turn = False
            _WRITE_TURN.release()
