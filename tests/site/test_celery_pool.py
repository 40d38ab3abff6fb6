"""The workers' threads pool (common/celery_pool.py): it wakes the event loop after each task, and a worker that
reconnects to its broker many times keeps one wake-up pipe, closed when the pool stops.

Celery's own threads pool gives its loop nothing to wake on (https://github.com/celery/celery/issues/6941): the first
test shows it, so that the day Celery fixes it, the test says `common/celery_pool.py` can go.
"""

from __future__ import annotations

import os
import select
from typing import Any

import pytest
from celery.concurrency import thread  # type: ignore[attr-defined]  # a submodule the stubs omit

from common.celery_pool import TaskPool


class RecordingLoop:
    """The two calls of Kombu's hub the pool makes, recorded."""

    def __init__(self) -> None:
        self.readers: dict[int, Any] = {}

    def add_reader(self, fd: int, callback: Any, *args: Any) -> None:
        self.readers[fd] = callback

    def remove_reader(self, fd: int) -> None:
        self.readers.pop(fd, None)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize(("pool_class", "wakes"), [(TaskPool, True), (thread.TaskPool, False)])
def test_a_finished_task_wakes_the_loop(pool_class: Any, wakes: bool) -> None:
    pool, loop = pool_class(limit=2), RecordingLoop()
    pool.register_with_event_loop(loop)
    try:
        pool.on_apply(lambda: None, callback=lambda _ret: None).wait(timeout=5)
        # The done-callback may run a moment after wait() returns: wait for the pipe to be readable.
        woken = [fd for fd in loop.readers if select.select([fd], [], [], 10)[0] and os.read(fd, 16)]
        assert bool(woken) == wakes, "the loop's pipe received a wake-up" if wakes else "Celery's pool wakes nothing"
    finally:
        pool.on_stop()


def test_reconnecting_keeps_one_pipe_and_stopping_closes_it() -> None:
    before = open_fds()
    pool, loop = TaskPool(limit=1), RecordingLoop()
    for _ in range(5):  # the consumer registers the pool again after every broker reconnect
        pool.register_with_event_loop(loop)
    assert open_fds() - before == 2
    pool.on_stop()
    assert open_fds() == before
    assert loop.readers == {}
