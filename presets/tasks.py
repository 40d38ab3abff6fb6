"""Beat and worker tasks of capacity watches: thin, one service call each."""

from __future__ import annotations

from celery import shared_task

from presets import watching


@shared_task(acks_late=True, reject_on_worker_lost=True)
def watches_scan() -> int:
    """Check every active capacity watch against the cached offers; return how many fired."""
    return watching.watches_scan()


@shared_task(acks_late=True, reject_on_worker_lost=True)
def watch_demand_signal(watch_id: int) -> None:
    """Send Lium's demand signal for a new watch (its failure is only logged)."""
    watching.watch_demand_signal(watch_id)
