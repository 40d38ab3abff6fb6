"""A controllable clock: real time plus an offset that tests can advance."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class Clock:
    """Tell simulated time; advancing it never sleeps."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return simulated epoch seconds."""
        with self._lock:
            return time.time() + self._offset

    def advance(self, seconds: float) -> float:
        """Move simulated time forward (never backward) and return the new offset."""
        if seconds < 0:
            raise ValueError("advance_seconds must be >= 0")
        with self._lock:
            self._offset += seconds
            return self._offset

    @property
    def offset(self) -> float:
        """Return the seconds the clock runs ahead of real time."""
        with self._lock:
            return self._offset

    def reset(self) -> None:
        """Drop the offset so simulated time equals real time again."""
        with self._lock:
            self._offset = 0.0


def iso(ts: float | None) -> str | None:
    """Format epoch seconds as ISO-8601 UTC with a trailing Z."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> float:
    """Parse an ISO-8601 string into epoch seconds; a naive time counts as UTC."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()
