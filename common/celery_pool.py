"""Celery's threads pool, plus a wake-up for the worker's event loop whenever a task finishes.

With a broker that runs on Celery's event loop (Redis), a worker whose prefetch window is full stops reading
its queues until a task finishes. The prefork pool's result pipe wakes the loop then; the stock threads pool
has nothing that does, so the next message waited for the loop's next timer: up to 10 s per message, which
on PostgreSQL + Redis delayed pod tracking, sweeps and webhook deliveries by minutes. This pool writes a byte
to a pipe the loop watches each time a task is done (after its acknowledgement). The embedded file-system
broker polls instead and never registers the pool with a loop, so there this is Celery's threads pool as is.

Works around https://github.com/celery/celery/issues/6941 (open): `tests/site/test_celery_pool.py` shows the stock
pool waking nothing. Selected by `CELERY_WORKER_POOL` (Celery's `--pool` option accepts only its own pool names).
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future
from typing import Any

from celery.concurrency import thread  # type: ignore[attr-defined]  # a submodule the stubs omit


class TaskPool(thread.TaskPool):
    """Threads pool that wakes the worker's event loop after every task."""

    _wake_read: int | None = None
    _wake_write: int | None = None
    _loop: Any = None

    def register_with_event_loop(self, loop: Any) -> None:
        super().register_with_event_loop(loop)
        # Called again each time the consumer reconnects to the broker: one pipe for the pool's life.
        if self._wake_read is None:
            self._wake_read, self._wake_write = os.pipe()
            os.set_blocking(self._wake_read, False)
            os.set_blocking(self._wake_write, False)
        self._loop = loop
        loop.add_reader(self._wake_read, self._drain)

    def on_apply(self, *args: Any, **kwargs: Any) -> thread.ApplyResult:
        result = super().on_apply(*args, **kwargs)
        if self._wake_write is not None:
            # Done means the task ran and its message was acknowledged: its prefetch slot is free.
            result.f.add_done_callback(self._wake)
        return result

    def on_stop(self) -> None:
        super().on_stop()  # waits for the running tasks, so nothing writes to the pipe after this
        if self._loop is not None and self._wake_read is not None:
            self._loop.remove_reader(self._wake_read)
        for fd in (self._wake_read, self._wake_write):
            if fd is not None:
                os.close(fd)
        self._wake_read = self._wake_write = None

    def _wake(self, _done: Future[Any]) -> None:
        fd = self._wake_write
        if fd is None:
            return
        # OSError: the pipe is full (the loop is already due to wake) or was closed at shutdown.
        with contextlib.suppress(OSError):
            os.write(fd, b"\0")

    def _drain(self) -> None:
        if self._wake_read is None:
            return
        with contextlib.suppress(OSError):
            os.read(self._wake_read, 4096)
