"""Attempt tallies per five minutes, with how many and how many unhealthy: the overview's last hour from twelve
rows instead of the hour's attempts joined to their rentals. The buckets are recounted from the rows."""

from django.db import migrations, models


def recount(apps, schema_editor):  # type: ignore[no-untyped-def]
    from ops.tallies import rebuild_tallies

    models_by_name = {name: apps.get_model("rentals", name) for name in ("Rental", "RentAttempt")}
    models_by_name |= {name: apps.get_model("ops", name) for name in ("StateTally", "CustomerTally", "AttemptTally")}
    rebuild_tallies(models_by_name)


class Migration(migrations.Migration):
    dependencies = [("ops", "0002_count_existing_rows")]

    operations = [
        migrations.RemoveConstraint(model_name="attempttally", name="attempt_tally_bucket"),
        migrations.RenameField(model_name="attempttally", old_name="hour", new_name="start"),
        migrations.AddField(model_name="attempttally", name="total", field=models.IntegerField(default=0)),
        migrations.AddField(model_name="attempttally", name="bad", field=models.IntegerField(default=0)),
        migrations.AddConstraint(
            model_name="attempttally",
            constraint=models.UniqueConstraint(fields=("start", "credential"), name="attempt_tally_bucket"),
        ),
        migrations.RunPython(recount, migrations.RunPython.noop),
    ]
