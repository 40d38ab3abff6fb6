"""The Celery application: configured from Django settings (the CELERY_ names), tasks found per app."""

import gc
import os
from typing import Any

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def freeze_startup_objects(**_kwargs: Any) -> None:
    """Leave the objects a pool process starts with out of the garbage collector's full passes.

    As in `deploy/gunicorn.conf.py`: a full pass over a loaded Django process costs tens of milliseconds and
    would land in the middle of a rent attempt.
    """
    gc.freeze()
