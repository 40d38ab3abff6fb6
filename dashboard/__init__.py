"""Project package: settings, URLs, the Celery app and site-wide views."""

from dashboard.celery import app as celery_app

__all__ = ("celery_app",)
