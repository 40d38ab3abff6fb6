"""Readiness checks: is each dependency this process needs working right now?"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import monotonic

from django.conf import settings
from django.utils import timezone

from accounts.secret_rows import secrets_undecryptable
from rentals.heartbeats import sweeper_last_run
from rentals.models import Heartbeat


def database_check() -> str | None:
    """Return None when a query runs, else what went wrong."""
    try:
        Heartbeat.objects.exists()  # any query proves the database answers; this table has a row or two
    except Exception as exc:  # any driver error means not ready
        return f"database: {type(exc).__name__}"
    return None


class Remembered:
    """A check whose answer is reused for READYZ_BROKER_CHECK_SECONDS: probes every second from several load
    balancers would otherwise each open a broker connection, or read every secret row."""

    def __init__(self, check: Callable[[], str | None]) -> None:
        self._check = check
        self._lock = threading.Lock()
        self._answer: tuple[float, str | None] | None = None  # (when checked, the answer)

    def __call__(self) -> str | None:
        with self._lock:  # one thread checks; the others wait for its answer
            if self._answer is None or monotonic() - self._answer[0] >= settings.READYZ_BROKER_CHECK_SECONDS:
                self._answer = (monotonic(), self._check())
            return self._answer[1]

    def forget(self) -> None:
        """Drop the remembered answer: the next call checks again."""
        with self._lock:
            self._answer = None


def _connect_to_broker() -> str | None:
    """Return None when the Celery broker accepts a connection, else what went wrong."""
    from dashboard.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
    except Exception as exc:  # a refused or timed-out connection
        return f"broker: {type(exc).__name__}"
    return None


def sweeper_check() -> str | None:
    """Return None when the sweeper ran recently (beat and a worker are alive), else how long ago it ran."""
    run = sweeper_last_run(now=timezone.now())
    if run.age is None:
        return "sweeper: has never run"
    return f"sweeper: last ran {int(run.age.total_seconds())} s ago" if run.stale else None


# Name at most this many rows in the probe's answer; `manage.py check_secrets` lists them all.
SECRETS_NAMED = 5


def _undecryptable_secrets() -> str | None:
    """Return None when every stored secret decrypts under FIELD_ENCRYPTION_KEYS, else which rows do not.

    A process started with a key missing (dropped before rotating) cannot sign webhooks or call Lium: it is not
    ready, so a rolling deploy stops there.
    """
    rows = secrets_undecryptable(limit=SECRETS_NAMED + 1)
    named = ", ".join(str(row) for row in rows[:SECRETS_NAMED]) + (" and more" if len(rows) > SECRETS_NAMED else "")
    return f"secrets: no FIELD_ENCRYPTION_KEYS key decrypts {named}" if rows else None


broker_check = Remembered(_connect_to_broker)
secrets_check = Remembered(_undecryptable_secrets)


def readiness() -> list[str]:
    """Return the failing parts (empty when ready). The rows are not checked when the database is down."""
    failures = [problem for problem in (database_check(), broker_check()) if problem]
    if not any(problem.startswith("database") for problem in failures):
        failures += [problem for problem in (sweeper_check(), secrets_check()) if problem]
    return failures
