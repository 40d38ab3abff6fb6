"""Writes: webhook endpoints, e-mail preferences, and the outbox (events and their deliveries).

`event_emit` is the one way an event enters the outbox. Call it inside the transaction of the change it
reports: the event and its deliveries commit or roll back with that change, and the deliveries are enqueued
only once it committed.
"""

from __future__ import annotations

import base64
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Customer
from notifications import events as ev
from notifications.addresses import UnsafeUrl, url_check
from notifications.backlog import backlog_trim
from notifications.models import Delivery, EmailPreference, Event, WebhookEndpoint, new_event_id
from notifications.payloads import event_body, rental_data
from notifications.queue import delivery_enqueue
from notifications.slack import kind_for_url
from rentals.models import Rental
from rentals.states import HOLDS_CLUSTER_STATES

MAX_ENDPOINTS_PER_CUSTOMER = 20


def _secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def events_clean(events: Any) -> list[str]:
    """Return a valid subscription list (["*"] or known types, deduplicated); raise ValidationError."""
    if not isinstance(events, list) or not events or not all(isinstance(item, str) for item in events):
        raise ValidationError('Give "events" as a list of event types, or ["*"] for all.')
    if ev.ALL in events:
        return [ev.ALL]
    unknown = sorted(set(events) - set(ev.EVENT_TYPES))
    if unknown:
        raise ValidationError(
            f"Unknown event type {unknown[0][:60]!r}; choose among {', '.join(ev.EVENT_TYPES)} or '*'."
        )
    return [event_type for event_type in ev.EVENT_TYPES if event_type in events]


def endpoint_create(
    *, customer: Customer, url: str, events: Any, created_by: User | None, kind: str | None = None
) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint and return it with its secret, which is never available in clear again.

    `kind` None: a Slack webhook URL (hooks.slack.com) is a `slack` endpoint, any other a `standard` one."""
    url = url.strip() if isinstance(url, str) else url
    kind = kind or kind_for_url(url if isinstance(url, str) else "")
    if kind not in WebhookEndpoint.Kind.values:
        raise ValidationError("Choose the kind 'standard' or 'slack' (or leave it out).", code="invalid_kind")
    try:
        url_check(url)
    except UnsafeUrl as exc:
        raise ValidationError(str(exc), code="unsafe_url") from exc
    cleaned = events_clean(events)
    with transaction.atomic():
        # The customer's row is the lock: two registrations at once count one after the other.
        Customer.objects.select_for_update().filter(pk=customer.pk).first()
        if WebhookEndpoint.objects.filter(customer=customer).count() >= MAX_ENDPOINTS_PER_CUSTOMER:
            raise ValidationError(
                f"A customer may have at most {MAX_ENDPOINTS_PER_CUSTOMER} webhook endpoints; delete one first.",
                code="too_many_endpoints",
            )
        secret = _secret()
        endpoint = WebhookEndpoint(customer=customer, url=url, events=cleaned, created_by=created_by, kind=kind)
        endpoint.set_secret(secret)
        endpoint.save()
    return endpoint, secret


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Delete an endpoint; its pending deliveries go with it."""
    endpoint.delete()


def endpoints_disable_made_by(*, customer_id: int, user_id: int, reason: str) -> int:
    """Disable the customer's endpoints this user made (they left it, or stopped being its admin) and end their
    pending deliveries; return how many endpoints were disabled. Call it in the team change's transaction."""
    now = timezone.now()
    endpoints = WebhookEndpoint.objects.filter(customer_id=customer_id, created_by_id=user_id, disabled_at__isnull=True)
    ids = list(endpoints.values_list("pk", flat=True))
    WebhookEndpoint.objects.filter(pk__in=ids).update(disabled_at=now, disabled_reason=reason[:200])
    Delivery.objects.filter(endpoint_id__in=ids, status=Delivery.Status.PENDING).update(
        status=Delivery.Status.FAILED,
        next_attempt_at=None,
        last_error=f"Not sent: the endpoint was disabled ({reason})"[:500],
    )
    return len(ids)


def emails_end_for(*, customer_id: int, user_id: int, reason: str) -> int:
    """End the pending e-mails of this customer's events to this user (they left it); return how many. Call it in
    the team change's transaction: a pending e-mail retries for a day and may carry SSH lines."""
    return Delivery.objects.filter(
        kind=Delivery.Kind.EMAIL, recipient_id=user_id, event__customer_id=customer_id, status=Delivery.Status.PENDING
    ).update(status=Delivery.Status.FAILED, next_attempt_at=None, last_error=f"Not sent: {reason}"[:500])


def email_preference_set(*, user: User, events: list[str]) -> EmailPreference:
    """Set which event types reach the user by e-mail (an empty list: none)."""
    chosen = [event_type for event_type in ev.EVENT_TYPES if event_type in events]
    preference, _ = EmailPreference.objects.update_or_create(user=user, defaults={"events": chosen})
    return preference


def email_events_for(*, user: User) -> list[str]:
    preference = EmailPreference.objects.filter(user=user).first()
    return list(preference.events) if preference else []


# --- The outbox -------------------------------------------------------------------------------------------


def _subscribers(customer_id: int, event_type: str) -> tuple[list[WebhookEndpoint], list[User]]:
    endpoints = [
        endpoint
        for endpoint in WebhookEndpoint.objects.filter(customer_id=customer_id, disabled_at__isnull=True)
        if ev.subscribed(endpoint.events, event_type)
    ]
    preferences = EmailPreference.objects.filter(
        user__memberships__customer_id=customer_id, user__is_active=True
    ).select_related("user")
    recipients = [p.user for p in preferences if event_type in p.events and p.user.email]
    return endpoints, recipients


def _deliveries(
    event: Event, endpoints: list[WebhookEndpoint], recipients: list[User], *, one_try: bool = False
) -> list[Delivery]:
    now = timezone.now()
    # A one-try delivery gives up at its creation: its first failure is final (`Delivery.one_try`).
    give_up = now if one_try else now + timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_SECONDS)
    rows = [
        Delivery(event=event, kind=Delivery.Kind.WEBHOOK, endpoint=e, next_attempt_at=now, give_up_at=give_up)
        for e in endpoints
    ] + [
        Delivery(event=event, kind=Delivery.Kind.EMAIL, recipient=u, next_attempt_at=now, give_up_at=give_up)
        for u in recipients
    ]
    created = Delivery.objects.bulk_create(rows)
    if any(row.pk is None for row in created):  # backends without RETURNING on bulk insert
        created = list(Delivery.objects.filter(event=event))
    backlog_trim(endpoint_ids=[endpoint.pk for endpoint in endpoints])
    return created


def _deliveries_enqueue_on_commit(deliveries: list[Delivery]) -> None:
    ids = [delivery.pk for delivery in deliveries]

    def deliveries_enqueue() -> None:
        for delivery_id in ids:
            delivery_enqueue(delivery_id)

    transaction.on_commit(deliveries_enqueue)


def event_emit(
    *,
    customer: Customer | int,
    type: str,
    data: dict[str, Any] | None = None,
    rental_id: int | None = None,
    dedup_key: str | None = None,
) -> Event | None:
    """Write an event and one delivery per subscribed endpoint and e-mail recipient of the customer.

    `data` is the event's `data` object; with `rental_id`, `data["rental"]` is added: the rental as
    `GET /api/v1/rentals/{id}` shows it, read inside the caller's transaction. Return None when nobody subscribes
    (nothing is written) or when `dedup_key` was already used.
    """
    if type not in ev.EVENT_TYPES:
        raise ValueError(f"Unknown event type {type!r}.")
    customer_id = customer if isinstance(customer, int) else customer.pk
    endpoints, recipients = _subscribers(customer_id, type)
    if not endpoints and not recipients:
        return None
    data = dict(data or {})
    if rental_id is not None and "rental" not in data:
        data = {"rental": rental_data(rental_id), **data}
    return _write(customer_id, type, data, rental_id, dedup_key, endpoints, recipients)


def _write(
    customer_id: int,
    event_type: str,
    data: dict[str, Any],
    rental_id: int | None,
    dedup_key: str | None,
    endpoints: list[WebhookEndpoint],
    recipients: list[User],
    *,
    one_try: bool = False,
) -> Event | None:
    event_id = new_event_id()
    created = timezone.now()
    event = Event(
        id=event_id,
        type=event_type,
        customer_id=customer_id,
        rental_id=rental_id,
        dedup_key=dedup_key,
        created_at=created,
        body=event_body(event_id=event_id, event_type=event_type, created=created, data=data),
    )
    try:
        with transaction.atomic():  # a savepoint: a duplicate dedup_key leaves the caller's transaction usable
            event.save(force_insert=True)
            deliveries = _deliveries(event, endpoints, recipients, one_try=one_try)
    except IntegrityError:
        if dedup_key is not None and Event.objects.filter(dedup_key=dedup_key).exists():
            return None
        raise
    _deliveries_enqueue_on_commit(deliveries)
    return event


def endpoint_send_test(*, endpoint: WebhookEndpoint) -> Delivery:
    """Send a `webhook.test` event to this endpoint only, whatever it subscribes to: one try, never retried."""
    data = {"message": "A test event from the Lium clusters dashboard.", "customer_id": endpoint.customer_id}
    with transaction.atomic():
        event = _write(endpoint.customer_id, ev.WEBHOOK_TEST, data, None, None, [endpoint], [], one_try=True)
        assert event is not None
        return Delivery.objects.get(event=event, endpoint=endpoint)


def delivery_redeliver(*, delivery: Delivery) -> Delivery:
    """Send the delivery's event again to the same endpoint or person (same event id): one try, never retried.

    A person asked for it and reads the answer in the log; retrying it for 24 h would let anyone with a dead
    endpoint multiply each click into dozens of POSTs on the housekeeping workers.
    """
    now = timezone.now()
    with transaction.atomic():
        again = Delivery.objects.create(
            event_id=delivery.event_id,
            kind=delivery.kind,
            endpoint_id=delivery.endpoint_id,
            recipient_id=delivery.recipient_id,
            next_attempt_at=now,
            give_up_at=now,
        )
        backlog_trim(endpoint_ids=[delivery.endpoint_id])
        _deliveries_enqueue_on_commit([again])
    return again


def removal_soon_emit(*, now: datetime | None = None) -> int:
    """Emit `rental.removal_soon` once per rental and scheduled time, for removals within the next hour."""
    now = now or timezone.now()
    due = Rental.objects.filter(
        Q(removal_scheduled_at__gt=now) & Q(removal_scheduled_at__lte=now + timedelta(hours=1)),
        status__in=HOLDS_CLUSTER_STATES,
    ).values_list("pk", "customer_id", "removal_scheduled_at")
    emitted = 0
    for rental_id, customer_id, at in due[:500]:
        assert at is not None  # filtered on above
        key = f"{ev.RENTAL_REMOVAL_SOON}:{rental_id}:{at.isoformat()}"
        if Event.objects.filter(dedup_key=key).exists():
            continue
        with transaction.atomic():
            event = event_emit(
                customer=customer_id,
                type=ev.RENTAL_REMOVAL_SOON,
                data={"removal_scheduled_at": at},
                rental_id=rental_id,
                dedup_key=key,
            )
        emitted += event is not None
    return emitted
