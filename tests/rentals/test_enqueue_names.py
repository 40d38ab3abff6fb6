"""`rentals.enqueue` names tasks by string (so it imports no task module): every name must be a real task."""

from __future__ import annotations

from celery import current_app

from rentals import enqueue


def test_every_task_the_engine_enqueues_by_name_is_registered_under_that_name() -> None:
    current_app.loader.import_default_modules()
    unknown = [name for name in enqueue.TASK_NAMES if name not in current_app.tasks]
    assert unknown == []
