"""Tell operators about a low runway: a signed POST to OPERATOR_WEBHOOK_URL and an e-mail to each operator.

The webhook goes through the customers' sender (`notifications.signed_post`: address check and pinning, caps,
timeouts, Standard Webhooks signature with OPERATOR_WEBHOOK_SECRET); the event type is `runway.low`. Each part
is recorded on the alert when it went, so a later try (the next runway check) sends only what has not gone yet.
Tries stop a day after the alert was raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.roles import OPERATOR_GROUP
from billing.models import RunwayAlert
from notifications.payloads import event_body
from notifications.signed_post import signed_post

logger = logging.getLogger(__name__)

RUNWAY_LOW = "runway.low"
GIVE_UP_AFTER = timedelta(days=1)
# The reason may name the host (up to 253 characters): it is cut to its column.


def alert_body(alert: RunwayAlert) -> str:
    """Serialise the alert's event once (same id, same bytes on every try)."""
    return event_body(
        event_id=f"msg_runway_{alert.pk}",
        event_type=RUNWAY_LOW,
        created=alert.at,
        data={
            "credential": alert.credential.name,
            "balance_usd": f"{alert.balance_usd:.2f}",
            "hourly_cost_usd": f"{alert.hourly_cost_usd:.2f}",
            "runway_hours": f"{alert.runway_hours:.2f}",
            "threshold_hours": settings.RUNWAY_ALERT_HOURS,
        },
    )


def _post(alert: RunwayAlert) -> str:
    """POST the signed event through the customers' sender; return "" when it was accepted (2xx), else why not."""
    outcome = signed_post(
        url=settings.OPERATOR_WEBHOOK_URL,
        secret=settings.OPERATOR_WEBHOOK_SECRET,
        msg_id=f"msg_runway_{alert.pk}",
        body=alert_body(alert),
    )
    if outcome.ok:
        return ""
    return outcome.error or f"HTTP {outcome.status_code}"


def operator_emails() -> list[str]:
    """Return the addresses of every active operator and superuser."""
    operators = User.objects.filter(Q(groups__name=OPERATOR_GROUP) | Q(is_superuser=True), is_active=True).exclude(
        email=""
    )
    return sorted({user.email for user in operators})


def _email(alert: RunwayAlert) -> int:
    recipients = operator_emails()
    if not recipients:
        return 0
    subject = f"Lium balance runs out in {alert.runway_hours:.1f} h (credential {alert.credential.name})"
    text = (
        f"The Lium balance behind credential {alert.credential.name} is ${alert.balance_usd:.2f}. Its running "
        f"clusters cost ${alert.hourly_cost_usd:.2f}/hour, so it lasts about {alert.runway_hours:.1f} hours "
        f"(alert below {settings.RUNWAY_ALERT_HOURS} h). When it runs dry, Lium removes every pod of the account.\n\n"
        f"Top the account up. The ops overview shows the runway: {settings.SITE_URL.rstrip('/')}/ops/\n"
    )
    send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, recipients)
    return len(recipients)


def alerts_send(*, now: datetime | None = None) -> int:
    """Send what has not gone yet of every open runway alert younger than a day; return alerts fully sent."""
    now = now or timezone.now()
    pending = RunwayAlert.objects.select_related("credential").filter(at__gte=now - GIVE_UP_AFTER)
    return operators_tell(pending, post=_post, email=_email, what="Runway alert", now=now)


def operators_tell(
    pending: QuerySet[Any], *, post: Callable[[Any], str], email: Callable[[Any], object], what: str, now: datetime
) -> int:
    """Send what has not gone yet of each pending row (webhook, e-mail) and record it; return rows fully sent.

    Rows are runway alerts or operator notices: both carry `webhook_delivered_at`, `webhook_status`, `emailed_at`.
    """
    done = 0
    for row in pending.filter(Q(emailed_at__isnull=True) | Q(webhook_delivered_at__isnull=True)):
        fields: dict[str, object] = {}
        if row.webhook_delivered_at is None and settings.OPERATOR_WEBHOOK_URL:
            problem = post(row)
            status_max = type(row)._meta.get_field("webhook_status").max_length
            fields["webhook_status"] = (problem or "delivered")[:status_max]
            if not problem:
                fields["webhook_delivered_at"] = now
        if row.emailed_at is None:
            try:
                email(row)
                fields["emailed_at"] = now
            except Exception as exc:  # SMTP and socket errors alike: the next check tries again
                logger.warning("%s %s: e-mail failed (%s).", what, row.pk, type(exc).__name__)
        type(row).objects.filter(pk=row.pk).update(**fields)
        done += "emailed_at" in fields and ("webhook_delivered_at" in fields or not settings.OPERATOR_WEBHOOK_URL)
    return done
