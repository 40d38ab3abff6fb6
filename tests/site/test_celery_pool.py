"""The workers' threads pool (common/celery_pool.py): it wakes the event loop after each task, and a worker that
reconnects to its broker many times keeps one wake-up pipe, closed when the pool stops."""

from __future__ import annotations

import os
import time
from typing import Any

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


def test_a_finished_task_wakes_the_loop() -> None:
    pool, loop = TaskPool(limit=2), RecordingLoop()
    pool.register_with_event_loop(loop)
    [read_fd] = loop.readers
    try:
        pool.on_apply(lambda: None, callback=lambda _ret: None).wait(timeout=5)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the done-callback may run a moment after wait() returns
            try:
                assert os.read(read_fd, 16), "the loop's pipe received a wake-up"
                break
            except BlockingIOError:
                time.sleep(0.01)
        else:
            raise AssertionError("no wake-up was written for the finished task")
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
