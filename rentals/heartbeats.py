"""When the sweeper last ran, and the one rule for when that is too long ago (beat or every worker is down).

The readiness probe (`dashboard.health`) and the operations overview (`ops.selectors`) both ask here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from rentals.models import Heartbeat

SWEEPER_HEARTBEAT = "sweeper"
# Six missed runs, and never less than a minute: a slow or restarting beat is not yet a dead one.
SWEEPER_GRACE_RUNS = 6
SWEEPER_GRACE_FLOOR = timedelta(minutes=1)


@dataclass(frozen=True)
class SweeperRun:
    at: datetime | None  # None: it has never run
    age: timedelta | None
    stale: bool


def sweeper_last_run(*, now: datetime) -> SweeperRun:
    """Return when the sweeper last ran, how long ago, and whether that is too long ago (one query)."""
    at = Heartbeat.objects.filter(name=SWEEPER_HEARTBEAT).values_list("at", flat=True).first()
    if at is None:
        return SweeperRun(at=None, age=None, stale=True)
    grace = max(timedelta(seconds=SWEEPER_GRACE_RUNS * settings.SWEEP_INTERVAL_SECONDS), SWEEPER_GRACE_FLOOR)
    return SweeperRun(at=at, age=now - at, stale=now - at > grace)
