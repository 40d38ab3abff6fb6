"""PostgreSQL statistics on a rental's submission hour, so the ops overview's hourly count is planned in parallel.

Without them PostgreSQL guesses every rental of the week is its own hour and status, plans one hash aggregate
over all of them, alone: 160 ms at a million rentals against 70-80 ms in parallel with them (bench/README.md,
the ops overview's cache miss). The expression is the one Django writes for `TruncHour("created_at")` in UTC.
"""

from django.db import migrations

CREATE = (
    "CREATE STATISTICS IF NOT EXISTS rental_created_hour "
    "ON (date_trunc('hour', created_at AT TIME ZONE 'UTC')), status FROM rentals_rental"
)
DROP = "DROP STATISTICS IF EXISTS rental_created_hour"


def statistics_create(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def statistics_drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("rentals", "0020_search_indexes_with_id")]

    operations = [migrations.RunPython(statistics_create, statistics_drop)]
