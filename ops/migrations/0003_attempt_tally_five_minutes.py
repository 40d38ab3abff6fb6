"""Attempt tallies per five minutes, with how many and how many unhealthy. (Their recount from the rows is gone:
0005 drops the tallies.)"""

from django.db import migrations, models


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
    ]
