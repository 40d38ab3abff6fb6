"""`rentals.enqueue` names tasks by string (so it imports no task module): every name must be a real task."""

from __future__ import annotations

from celery import current_app

from rentals import enqueue


def test_every_task_the_engine_enqueues_by_name_is_registered_under_that_name() -> None:
    current_app.loader.import_default_modules()
    names = [value for value in vars(enqueue).values() if isinstance(value, str) and value.startswith("rentals.tasks.")]
    assert len(names) == 9
    assert [name for name in names if name not in current_app.tasks] == []


def test_a_task_enqueued_from_another_thread_goes_to_the_projects_broker() -> None:
    """Worker threads (the threads pool) and web threads have no Celery app of their own: `current_app` there
    must still be the project's app, or a message would go to Celery's default broker and be lost."""
    import threading

    from django.conf import settings

    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(current_app.conf.broker_url))
    thread.start()
    thread.join()
    assert seen == [settings.CELERY_BROKER_URL]
