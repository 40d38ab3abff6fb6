"""Running tallies the operations overview reads instead of aggregating a week of rows on every view.

Each row counts rentals whose creation fell in one bucket, an hour (or, for customers, also a whole day) in UTC,
or rent attempts started in one five-minute bucket. `ops.tallies` keeps them in step with every rental created,
every state change and every attempt recorded, inside the same transaction, and reads them back for sliding
windows.
"""

from django.db import models

from accounts.models import Customer, UpstreamCredential


class StateTally(models.Model):
    """Rentals created in `hour` that are now in `status`."""

    hour = models.DateTimeField()
    status = models.CharField(max_length=16)
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "status"], name="state_tally_bucket")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.status}: {self.count}"


class CustomerTally(models.Model):
    """Rentals of `customer` created in the bucket starting at `start`, an hour or a whole day long."""

    class Span(models.TextChoices):
        HOUR = "hour", "Hour"
        DAY = "day", "Day"

    span = models.CharField(max_length=4, choices=Span.choices)
    start = models.DateTimeField()
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="+")
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["span", "start", "customer"], name="customer_tally_bucket"),
        ]
        # The overview sums a range of buckets per customer: with the count in the index it never reads the table.
        indexes = [models.Index(fields=["span", "start", "customer", "count"], name="customer_tally_counts")]

    def __str__(self) -> str:
        return f"{self.span} {self.start:%Y-%m-%d %H:00} customer {self.customer_id}: {self.count}"


class AttemptTally(models.Model):
    """Rent attempts of `credential` started in the five minutes from `start`: how many, how many unhealthy
    (inconclusive or never sent), how many answered 429, and the latest of each kind.

    Five minutes, so that the overview's last hour is twelve rows, not the hour's attempts joined to their rentals.
    Attempts are append-only, so the latest times only ever move forward.
    """

    start = models.DateTimeField()
    credential = models.ForeignKey(UpstreamCredential, on_delete=models.CASCADE, related_name="+")
    total = models.IntegerField(default=0)
    bad = models.IntegerField(default=0)
    http_429 = models.IntegerField(default=0)
    last_2xx_at = models.DateTimeField(null=True)
    last_confirmed_at = models.DateTimeField(null=True)
    last_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "credential"], name="attempt_tally_bucket")]

    def __str__(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M} credential {self.credential_id}"
