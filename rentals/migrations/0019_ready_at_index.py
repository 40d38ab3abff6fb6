# The ops overview's time to ready per fabric type reads the rentals that became ready in the last week.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rentals", "0018_scheduled_start"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="rental",
            index=models.Index(fields=["ready_at"], name="rental_ready_at"),
        ),
    ]
