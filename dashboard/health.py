"""Readiness checks: is each dependency this process needs working right now?"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from rentals.models import Heartbeat

# The sweeper runs every SWEEP_INTERVAL_SECONDS; this many missed runs means beat or the workers are down.
SWEEPER_GRACE_RUNS = 6


def check_database() -> str | None:
    """Return None when a query runs, else what went wrong."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error means not ready
        return f"database: {type(exc).__name__}"
    return None


def check_broker() -> str | None:
    """Return None when the Celery broker accepts a connection, else what went wrong."""
    from dashboard.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
    except Exception as exc:  # a refused or timed-out connection
        return f"broker: {type(exc).__name__}"
    return None


def check_sweeper() -> str | None:
    """Return None when the sweeper ran recently (beat and a worker are alive), else how long ago it ran."""
    limit = timedelta(seconds=settings.SWEEP_INTERVAL_SECONDS * SWEEPER_GRACE_RUNS + 30)
    heartbeat = Heartbeat.objects.filter(name="sweeper").only("at").first()
    if heartbeat is None:
        return "sweeper: has never run"
    age = timezone.now() - heartbeat.at
    if age > limit:
        return f"sweeper: last ran {int(age.total_seconds())} s ago"
    return None


def readiness() -> list[str]:
    """Return the failing parts (empty when ready). The sweeper is not checked when the database is down."""
    failures = [problem for problem in (check_database(), check_broker()) if problem]
    if not any(problem.startswith("database") for problem in failures):
        sweeper = check_sweeper()
        if sweeper:
            failures.append(sweeper)
    return failures
