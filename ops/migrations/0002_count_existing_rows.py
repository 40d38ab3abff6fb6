"""Count the rentals and attempts that exist already into the new tallies."""

from django.db import migrations


def count_existing(apps, schema_editor):  # type: ignore[no-untyped-def]
    from ops.tallies import rebuild_tallies

    names = ("Rental", "RentAttempt")
    models = {name: apps.get_model("rentals", name) for name in names}
    # Attempts are counted by 0003, into the five-minute buckets it makes (this state's table is hourly).
    models |= {name: apps.get_model("ops", name) for name in ("StateTally", "CustomerTally")}
    rebuild_tallies(models)


class Migration(migrations.Migration):
    dependencies = [("ops", "0001_tallies"), ("rentals", "0007_attention_index")]

    operations = [migrations.RunPython(count_existing, migrations.RunPython.noop)]
