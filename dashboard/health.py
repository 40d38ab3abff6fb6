"""Readiness checks: is each dependency this process needs working right now?"""

from __future__ import annotations

import threading
from time import monotonic

from django.conf import settings
from django.utils import timezone

from accounts.secret_rows import secrets_undecryptable
from rentals.heartbeats import sweeper_last_run
from rentals.models import Heartbeat


def check_database() -> str | None:
    """Return None when a query runs, else what went wrong."""
    try:
        Heartbeat.objects.exists()  # any query proves the database answers; this table has a row or two
    except Exception as exc:  # any driver error means not ready
        return f"database: {type(exc).__name__}"
    return None


_broker_lock = threading.Lock()
_broker_result: tuple[float, str | None] | None = None  # (when checked, the answer)


def forget_broker_check() -> None:
    """Drop the remembered broker answer: the next check connects again."""
    global _broker_result
    with _broker_lock:
        _broker_result = None


def check_broker() -> str | None:
    """Return None when the Celery broker accepts a connection, else what went wrong.

    The answer is reused for READYZ_BROKER_CHECK_SECONDS: probes every second from several load balancers
    would otherwise open (and tear down) one broker connection each.
    """
    global _broker_result
    with _broker_lock:  # one thread connects; the others wait for its answer
        if _broker_result is not None and monotonic() - _broker_result[0] < settings.READYZ_BROKER_CHECK_SECONDS:
            return _broker_result[1]
        _broker_result = (monotonic(), _connect_to_broker())
        return _broker_result[1]


def _connect_to_broker() -> str | None:
    from dashboard.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
    except Exception as exc:  # a refused or timed-out connection
        return f"broker: {type(exc).__name__}"
    return None


def check_sweeper() -> str | None:
    """Return None when the sweeper ran recently (beat and a worker are alive), else how long ago it ran."""
    run = sweeper_last_run(now=timezone.now())
    if run.age is None:
        return "sweeper: has never run"
    return f"sweeper: last ran {int(run.age.total_seconds())} s ago" if run.stale else None


_secrets_lock = threading.Lock()
_secrets_result: tuple[float, str | None] | None = None  # (when checked, the answer)
# Name at most this many rows in the probe's answer; `manage.py check_secrets` lists them all.
SECRETS_NAMED = 5


def forget_secrets_check() -> None:
    """Drop the remembered secrets answer: the next check reads every row again."""
    global _secrets_result
    with _secrets_lock:
        _secrets_result = None


def check_secrets() -> str | None:
    """Return None when every stored secret decrypts under FIELD_ENCRYPTION_KEYS, else which rows do not.

    A process started with a key missing (dropped before rotating) cannot sign webhooks or call Lium: it is not
    ready, so a rolling deploy stops there. The answer is reused like the broker's: it reads every secret row.
    """
    global _secrets_result
    with _secrets_lock:
        if _secrets_result is not None and monotonic() - _secrets_result[0] < settings.READYZ_BROKER_CHECK_SECONDS:
            return _secrets_result[1]
        rows = secrets_undecryptable(limit=SECRETS_NAMED + 1)
        named = ", ".join(str(row) for row in rows[:SECRETS_NAMED]) + (" and more" if len(rows) > SECRETS_NAMED else "")
        problem = f"secrets: no FIELD_ENCRYPTION_KEYS key decrypts {named}" if rows else None
        _secrets_result = (monotonic(), problem)
        return problem


def readiness() -> list[str]:
    """Return the failing parts (empty when ready). The rows are not checked when the database is down."""
    failures = [problem for problem in (check_database(), check_broker()) if problem]
    if not any(problem.startswith("database") for problem in failures):
        failures += [problem for problem in (check_sweeper(), check_secrets()) if problem]
    return failures
