from django.db import migrations, models


class Migration(migrations.Migration):
    """The ops attention queue reads the rentals that may need a human in `updated_at` order off one index."""

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
    ]
