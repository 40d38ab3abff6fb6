"""Counted the rentals that existed into the new tallies; 0003, which follows it, recounts every tally from the
rows, so this one does nothing now (a migration must not import code that may change or go)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("ops", "0001_tallies"), ("rentals", "0007_attention_index")]

    operations = []  # type: ignore[var-annotated]
