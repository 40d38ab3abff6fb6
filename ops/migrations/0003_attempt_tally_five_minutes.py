"""Attempt tallies per five minutes, with how many and how many unhealthy: the overview's last hour from twelve
rows instead of the hour's attempts joined to their rentals. The buckets are recounted from the rows."""

from datetime import UTC
from typing import Any

from django.db import migrations, models
from django.db.models import Count, F, Max, Q
from django.db.models.functions import TruncDay, TruncHour, TruncMinute

# Self-contained (a migration must not import code that may change or go): the recount as of this migration.
UNHEALTHY = ("inconclusive", "never_sent")


def _latest(a, b):  # type: ignore[no-untyped-def]
    return b if a is None or (b is not None and b > a) else a


def recount(apps, schema_editor):  # type: ignore[no-untyped-def]
    rental, attempt = (apps.get_model("rentals", name) for name in ("Rental", "RentAttempt"))
    state_tally, customer_tally, attempt_tally = (
        apps.get_model("ops", name) for name in ("StateTally", "CustomerTally", "AttemptTally")
    )
    for tally in (state_tally, customer_tally, attempt_tally):
        tally.objects.all().delete()
    rentals = rental.objects.order_by()
    states = rentals.values(h=TruncHour("created_at", tzinfo=UTC), s=F("status")).annotate(n=Count("id"))
    state_tally.objects.bulk_create(state_tally(hour=r["h"], status=r["s"], count=r["n"]) for r in states)
    for span, trunc in (("hour", TruncHour), ("day", TruncDay)):
        rows = rentals.values(t=trunc("created_at", tzinfo=UTC), c=F("customer_id")).annotate(n=Count("id"))
        customer_tally.objects.bulk_create(
            customer_tally(span=span, start=r["t"], customer_id=r["c"], count=r["n"]) for r in rows
        )
    per_minute = (
        attempt.objects.order_by()
        .values(t=TruncMinute("started_at", tzinfo=UTC), c=F("rental__credential_id"))
        .annotate(
            n=Count("id"),
            bad=Count("id", filter=Q(classification__in=UNHEALTHY)),
            n429=Count("id", filter=Q(http_status=429)),
            l2xx=Max("started_at", filter=Q(http_status__gte=200, http_status__lt=300)),
            lc=Max("started_at", filter=Q(classification="confirmed")),
            la=Max("started_at"),
        )
    )
    buckets: dict[Any, Any] = {}
    for r in per_minute:
        start = r["t"].astimezone(UTC).replace(second=0, microsecond=0)
        start = start.replace(minute=start.minute - start.minute % 5)
        if (start, r["c"]) not in buckets:
            buckets[start, r["c"]] = attempt_tally(start=start, credential_id=r["c"])
        row = buckets[start, r["c"]]
        row.total += r["n"]
        row.bad += r["bad"]
        row.http_429 += r["n429"]
        row.last_2xx_at = _latest(row.last_2xx_at, r["l2xx"])
        row.last_confirmed_at = _latest(row.last_confirmed_at, r["lc"])
        row.last_at = _latest(row.last_at, r["la"])
    attempt_tally.objects.bulk_create(buckets.values(), batch_size=2000)


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
