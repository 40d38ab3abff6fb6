from django.db import migrations


class Migration(migrations.Migration):
    """The overview counts from the rows (ORM aggregates behind a short cache): its tallies go."""

    dependencies = [("ops", "0004_customer_tally_counts")]

    operations = [
        migrations.DeleteModel(name="StateTally"),
        migrations.DeleteModel(name="AttemptTally"),
        migrations.DeleteModel(name="CustomerTally"),
    ]
