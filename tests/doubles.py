"""Test doubles shared by every folder: hand-moved clocks and a recorder of Celery enqueues (the root conftest's
`clock`, `limiter_clock` and `enqueued` fixtures hand them out)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

# The nodes a rental is made on when a test names none (the fake upstream answers with pods on them).
EXECUTORS = ["exec-a", "exec-b"]


@dataclass
class Enqueued:
    """What would have been sent to Celery: (task name, args, countdown)."""

    calls: list[tuple[str, tuple[object, ...], float | None]] = field(default_factory=list)

    def messages(self) -> list[tuple[str, tuple[object, ...]]]:
        """(task name, args) of each enqueue, countdown left out."""
        return [(name, args) for name, args, _ in self.calls]

    def of(self, task_name: str) -> list[tuple[tuple[object, ...], float | None]]:
        return [(args, countdown) for name, args, countdown in self.calls if name.endswith(task_name)]


class Clock:
    """A hand-moved `timezone.now()` for the engine, the transitions, the tracker and the models."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


class WallClock:
    """A stand-in for the `time` module inside ONE module (`monkeypatch.setattr("common.ratelimit.time", ...)`):
    its `time()` answers `now`, moved by hand; the rest is the real module's. Patching `time.time` itself would
    move the clock of every thread and library in the process (the live server, Celery, the database driver)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)
