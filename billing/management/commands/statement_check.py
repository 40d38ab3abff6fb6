"""`manage.py statement_check [--days N | --day YYYY-MM-DD|today]`: what beat does daily, now, or for one day.

`--day today` compares today so far: Lium debits every 5 minutes, so a running pod may differ by up to 5
minutes of its cost there (the simulator charges to the second); beat only compares complete days.
"""

from __future__ import annotations

from datetime import UTC, date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.models import UpstreamCredential
from billing.operator_notices import notices_send
from billing.statement import previous_days, statement_compare


class Command(BaseCommand):
    help = "Compare Lium's statement of past UTC days with our cost per pod and day; alert operators on a mismatch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None, help="previous N UTC days (default STATEMENT_CHECK_DAYS)")
        parser.add_argument("--day", default="", help="one UTC day, YYYY-MM-DD, or today (so far)")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.conf import settings

        now = timezone.now()
        today = now.astimezone(UTC).date()
        if options["day"]:
            try:
                day = today if options["day"] == "today" else date.fromisoformat(options["day"])
            except ValueError:
                raise CommandError("Give --day as YYYY-MM-DD (a UTC day) or today.") from None
            if day > today:
                raise CommandError(f"--day must not be after today ({today} UTC).")
            if day == today:
                self.stdout.write("Today so far: Lium debits every 5 minutes, so a running pod may differ by that.")
            days = [day]
        else:
            count = settings.STATEMENT_CHECK_DAYS if options["days"] is None else options["days"]
            if not 1 <= count <= 31:
                raise CommandError("--days must be 1 to 31.")
            days = previous_days(now, count)
        for credential in UpstreamCredential.objects.filter(active=True).order_by("pk"):
            result = statement_compare(credential=credential, days=days, now=now)
            if result.error:
                self.stdout.write(f"{credential.name}: statement not read: {result.error}")
            else:
                self.stdout.write(f"{credential.name}: {result.lines} pod-days compared, {result.disagreeing} disagree")
        notices_send(now=now)
