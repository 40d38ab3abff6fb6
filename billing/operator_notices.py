"""Operator notices beside the runway alert: a statement day that disagrees, a refused pod listing.

`notice_raise` opens a notice once per kind and key (the database keeps one open); `notice_resolve` closes it
when what it reports is over. `notices_send` sends what has not gone yet of every open notice younger than a day,
as the runway alert does (`billing.operator_alerts`): a signed POST to OPERATOR_WEBHOOK_URL (event type = the
notice's kind) and an e-mail to each operator; beat's runway and statement checks call it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.models import OperatorNotice
from billing.operator_alerts import operator_emails, operators_tell
from notifications.payloads import event_body
from notifications.signed_post import signed_post

logger = logging.getLogger(__name__)

GIVE_UP_AFTER = timedelta(days=1)


def notice_raise(
    *, kind: str, key: str, credential_id: int, subject: str, text: str, data: dict[str, Any], now: datetime
) -> OperatorNotice | None:
    """Open a notice unless one of this kind and key is open; return the new one, or None."""
    if OperatorNotice.objects.filter(kind=kind, key=key, resolved_at__isnull=True).exists():
        return None
    try:
        with transaction.atomic():  # a savepoint: the database keeps one open notice per kind and key
            notice = OperatorNotice.objects.create(
                kind=kind, key=key, credential_id=credential_id, at=now, subject=subject[:200], text=text, data=data
            )
    except IntegrityError:
        return None  # another worker opened it meanwhile
    logger.warning("Operator notice %s %s: %s", kind, key, subject)
    return notice


def notice_resolve(*, kind: str, key: str, now: datetime) -> int:
    """Close the open notice of this kind and key, if any."""
    open_notice = OperatorNotice.objects.filter(kind=kind, key=key, resolved_at__isnull=True)
    # A read first: the pod poller asks after every listing, and a write would take SQLite's lock each time.
    return open_notice.update(resolved_at=now) if open_notice.exists() else 0


def _post(notice: OperatorNotice) -> str:
    body = event_body(event_id=f"msg_notice_{notice.pk}", event_type=notice.kind, created=notice.at, data=notice.data)
    outcome = signed_post(
        url=settings.OPERATOR_WEBHOOK_URL,
        secret=settings.OPERATOR_WEBHOOK_SECRET,
        msg_id=f"msg_notice_{notice.pk}",
        body=body,
    )
    return "" if outcome.ok else outcome.error or f"HTTP {outcome.status_code}"


def _email(notice: OperatorNotice) -> None:
    recipients = operator_emails()
    if recipients:
        text = f"{notice.text}\n\nThe ops overview lists it: {settings.SITE_URL.rstrip('/')}/ops/\n"
        send_mail(notice.subject, text, settings.DEFAULT_FROM_EMAIL, recipients)


def notices_send(*, now: datetime | None = None) -> int:
    """Send what has not gone yet of every notice younger than a day; return how many went fully."""
    now = now or timezone.now()
    pending = OperatorNotice.objects.filter(at__gte=now - GIVE_UP_AFTER)
    return operators_tell(pending, post=_post, email=_email, what="Operator notice", now=now)
