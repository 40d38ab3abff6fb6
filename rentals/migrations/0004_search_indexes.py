from django.db import migrations, models


class Migration(migrations.Migration):
    """Support search: a customer ref's and a user's newest rentals are read in index order."""

    dependencies = [
        ("rentals", "0003_retry_until_and_attempt_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="rental",
            index=models.Index(fields=["customer_ref", "-created_at"], name="rental_ref_recent"),
        ),
        migrations.AddIndex(
            model_name="rental",
            index=models.Index(fields=["created_by", "-created_at"], name="rental_creator_recent"),
        ),
    ]
