"""Deliver one outbox row: a signed POST (Standard Webhooks) or an e-mail, then settle or schedule a retry.

A delivery is claimed with a conditional UPDATE (pending, due, no live lease), so a duplicate task finds nothing
to do. No transaction is open during the HTTP call. Every attempt sends the event's stored body with the
event's id as `webhook-id`; only `webhook-timestamp` and the signature over it are new.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db.models import F, Q
from django.template.loader import render_to_string
from django.utils import timezone

from accounts.models import Membership
from common.backoff import backoff_seconds
from notifications import events as ev
from notifications.models import Delivery
from notifications.queue import delivery_enqueue
from notifications.signed_post import EXCERPT_CHARS, Outcome, ms_since, signed_post
from notifications.slack import slack_message
from rentals.models import error_from_lium

logger = logging.getLogger(__name__)

NO_KEY_OPENS_IT = (
    "Not sent: the signing secret does not decrypt with FIELD_ENCRYPTION_KEYS; an operator must restore the key "
    "it was made with (manage.py check_secrets names the rows)."
)
# A retry further away than this waits for the sweeper instead of a delayed message: a broker redelivers an
# unacknowledged message after its visibility timeout (one hour on Redis).
MAX_COUNTDOWN_SECONDS = 3000
NOT_RETRIED = "Tried once, not retried (a test send or redelivery); send it again from the log."


def delivery_backoff(attempt: int) -> float:
    """Return the wait after `attempt` failed attempts: exponential, capped, with jitter over its upper half."""
    return backoff_seconds(
        failures=attempt, base=settings.WEBHOOK_BACKOFF_BASE_SECONDS, cap=settings.WEBHOOK_BACKOFF_CAP_SECONDS
    )


def delivery_attempt(*, delivery_id: int) -> str:
    """Make one attempt if the delivery is due; return what happened (`delivered`, `retry`, `failed`, `not_due`)."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.WEBHOOK_TIMEOUT_SECONDS + 30)
    claimed = (
        Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING, next_attempt_at__lte=now)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=lease, attempt_count=F("attempt_count") + 1, last_attempt_at=now)
    )
    if not claimed:
        return "not_due"
    delivery = Delivery.objects.select_related("event", "endpoint", "recipient").filter(pk=delivery_id).first()
    if delivery is None:  # its endpoint was deleted meanwhile
        return "gone"
    if delivery.endpoint is not None and delivery.endpoint.disabled_at is not None:  # its maker left the team
        return _settle(delivery, lease, Outcome(ok=False, error="Not sent: the endpoint is disabled.", final=True))
    try:
        outcome = _webhook_send(delivery) if delivery.kind == Delivery.Kind.WEBHOOK else _email_send(delivery)
    except Exception as exc:  # a defect must not leave the row leased forever: record it and retry
        logger.exception("Delivery %s of event %s failed unexpectedly", delivery.pk, delivery.event_id)
        outcome = Outcome(ok=False, error=f"Internal error: {type(exc).__name__}")
    return _settle(delivery, lease, outcome)


def _excerpt(text: str) -> str:
    """Return what the receiver (the customer's server) said, as a column can keep it.

    Without its NUL bytes: PostgreSQL refuses them in text, and the delivery could never be settled.
    """
    return text.replace("\x00", "")[:EXCERPT_CHARS]


def _settle(delivery: Delivery, lease: datetime, outcome: Outcome) -> str:
    now = timezone.now()
    fields: dict[str, object] = {
        "lease_until": None,
        "last_status_code": outcome.status_code,
        "last_duration_ms": outcome.duration_ms,
        "last_response": _excerpt(outcome.response),
        "last_error": _excerpt(outcome.error),
    }
    delay = 0.0
    if outcome.ok:
        result = "delivered"
        fields.update(status=Delivery.Status.DELIVERED, delivered_at=now, next_attempt_at=None)
    else:
        delay = delivery_backoff(delivery.attempt_count)  # already counts this attempt (claimed above)
        next_at = now + timedelta(seconds=delay)
        if outcome.final or next_at > delivery.give_up_at:
            result = "failed"
            fields.update(status=Delivery.Status.FAILED, next_attempt_at=None)
            if delivery.one_try:
                fields["last_error"] = _excerpt(f"{NOT_RETRIED} {outcome.error}".strip())
        else:
            result = "retry"
            fields.update(next_attempt_at=next_at)
    # Only the holder of this attempt's lease settles it (a sweeper may have handed an expired one on).
    Delivery.objects.filter(pk=delivery.pk, lease_until=lease).update(**fields)
    logger.info(
        "Delivery %s of event %s (%s): %s, status %s, attempt %s",
        delivery.pk,
        delivery.event_id,
        delivery.kind,
        result,
        outcome.status_code,
        delivery.attempt_count,
    )
    if result == "retry" and delay <= MAX_COUNTDOWN_SECONDS:
        delivery_enqueue(delivery.pk, countdown=delay)
    return result


def _webhook_send(delivery: Delivery) -> Outcome:
    endpoint, event = delivery.endpoint, delivery.event
    assert endpoint is not None
    try:
        secret = endpoint.get_secret()
    except ValueError:
        # The key it was made with is gone (dropped before rotating): loud, and retried while a key may return.
        logger.error("Webhook endpoint %s: its secret does not decrypt; run manage.py check_secrets.", endpoint.pk)
        return Outcome(ok=False, error=NO_KEY_OPENS_IT)
    # A Slack endpoint gets the event as a Slack message (same bytes every attempt); the signature headers go too.
    slack = endpoint.kind == endpoint.Kind.SLACK
    body = slack_message(event_type=event.type, body=event.body) if slack else event.body
    return signed_post(url=endpoint.url, secret=secret, msg_id=event.id, body=body)


def _email_send(delivery: Delivery) -> Outcome:
    user, event = delivery.recipient, delivery.event
    if user is None or not user.email or not user.is_active:
        return Outcome(ok=False, error="The recipient has no e-mail address.", final=True)
    # Re-checked right before sending: a retry or a redelivery made after the person left must not reach them.
    if not Membership.objects.filter(user=user, customer_id=event.customer_id).exists():
        return Outcome(ok=False, error="Not sent: the recipient is not a member of this customer.", final=True)
    payload = json.loads(event.body)
    data = payload.get("data") or {}
    rental = data.get("rental")
    context = {
        "event": payload,
        "title": ev.EVENT_TYPES.get(event.type, event.type),
        "rental": rental,
        # "Lium said" or "Why": the page's rule, applied to the rental as the event carries it.
        "error_from_lium": error_from_lium(((rental or {}).get("error") or {}).get("request_id")),
        "data": data,
        "user": user,
        "site_url": settings.SITE_URL.rstrip("/"),
    }
    subject = " ".join(render_to_string("notifications/email/subject.txt", context).split())
    body = render_to_string("notifications/email/body.txt", context)
    started = time.monotonic()
    message = EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email], headers={"X-Event-Id": event.id})
    try:
        message.send()
    except Exception as exc:  # SMTP, socket and TLS errors alike: retry later
        return Outcome(ok=False, duration_ms=ms_since(started), error=f"{type(exc).__name__}: {exc}"[:EXCERPT_CHARS])
    return Outcome(ok=True, duration_ms=ms_since(started), response=f"Sent to {user.email}")
