from django.db import migrations, models


class Migration(migrations.Migration):
    """The overview's customer windows read (span, start, customer, count) off the index alone."""

    dependencies = [
        ("accounts", "0002_customer_hourly_spend_cap_usd_sshpublickey"),
        ("ops", "0003_attempt_tally_five_minutes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="customertally",
            index=models.Index(fields=["span", "start", "customer", "count"], name="customer_tally_counts"),
        ),
    ]
