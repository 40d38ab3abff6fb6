from django.db import migrations, models


class Migration(migrations.Migration):
    """The ops overview: its attention queue reads the rentals that may need a human in `updated_at` order off one
    index, and its last day's 429s off another."""

    dependencies = [("rentals", "0014_unsettled_pod_name_index")]

    operations = [
        migrations.AddIndex(
            model_name="rental",
            index=models.Index(
                condition=models.Q(
                    status__in=("unknown", "degraded", "retrying", "sending", "queued", "terminating", "rented")
                ),
                fields=["updated_at"],
                name="rental_attention",
            ),
        ),
        migrations.AddIndex(
            model_name="rentattempt",
            index=models.Index(condition=models.Q(http_status=429), fields=["started_at"], name="attempt_429_started"),
        ),
    ]
