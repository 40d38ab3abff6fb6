"""Counted the rentals and attempts that existed into the new tallies; a no-op since 0005 drops the tallies."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("ops", "0001_tallies"), ("rentals", "0007_attention_index")]

    operations = [migrations.RunPython(migrations.RunPython.noop, migrations.RunPython.noop)]
