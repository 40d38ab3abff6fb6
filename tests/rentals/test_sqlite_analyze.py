"""The embedded default refreshes SQLite's planner statistics hourly (beat); PostgreSQL needs nothing."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from rentals.tasks import sqlite_analyze

pytestmark = pytest.mark.django_db


def test_the_statistics_task_is_scheduled() -> None:
    assert settings.CELERY_BEAT_SCHEDULE["sqlite-analyze"]["task"] == "rentals.tasks.sqlite_analyze"


def test_sqlite_gets_statistics_for_the_rentals_indexes_and_postgresql_is_left_alone(make_rental) -> None:
    for _ in range(3):
        make_rental()
    if connection.vendor != "sqlite":
        assert sqlite_analyze() is False
        return
    assert sqlite_analyze() is True
    with connection.cursor() as cursor:
        cursor.execute("SELECT idx FROM sqlite_stat1 WHERE tbl = 'rentals_rental'")
        indexes = {row[0] for row in cursor.fetchall()}
    assert "rental_customer_recent_id" in indexes
