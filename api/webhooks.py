"""Webhook endpoints in the JSON API (a django-ninja Router, added to api.v1 at /webhooks).

An endpoint belongs to a customer: the key's user's customer, or, for an operator, the one named in the body.
Reads need the `read` scope, changes the `manage` scope; only the customer's admins (and operators) change
endpoints, its other members read them; support reads every endpoint and changes none.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import ConfigDict, Field, StrictStr

from accounts.audit import support_read_record
from accounts.models import Customer
from accounts.roles import is_operator
from api.auth import require_scope, require_writer
from api.bodies import body_schema, json_body
from api.errors import ApiError
from api.representations import json_response
from api.schemas import CustomerId, CustomerName, CustomerOut, ErrorOut
from notifications import selectors, services, throttles
from notifications.models import Delivery, WebhookEndpoint
from rentals.selectors import customer_get_named

router = Router(tags=["webhooks"])
ERRORS: dict[Any, Any] = {frozenset({400, 401, 403, 404, 409, 422, 429}): ErrorOut}


class WebhookCreateIn(Schema):
    model_config = ConfigDict(extra="forbid")

    url: StrictStr = Field(..., max_length=2000, description="An https URL on a public address (in production).")
    kind: Literal["standard", "slack"] | None = Field(
        None, description="slack: events arrive as Slack messages; left out: slack for a hooks.slack.com URL."
    )
    events: list[StrictStr] = Field(..., min_length=1, max_length=50, description='Event types, or ["*"] for all.')
    # Bounded as in a rent order: an unbounded name took a lone surrogate, which no database can store (a 500).
    customer: CustomerId | CustomerName | None = Field(
        None, description="The customer's id or name; operators must give it, members may leave it out."
    )


class WebhookOut(Schema):
    id: int
    url: str = Field(..., description="A Slack URL without its last segment (its token).")
    kind: str
    events: list[str]
    customer: CustomerOut
    created_at: datetime
    created_by: str | None = Field(None, description="The username of whoever added it.")
    disabled_at: datetime | None = Field(
        None, description="When it stopped receiving events: its maker left the customer or stopped being its admin."
    )


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(..., description="The whsec_ signing secret: shown in this answer only.")


class WebhookListOut(Schema):
    items: list[WebhookOut]


class DeliveryOut(Schema):
    id: int
    event_id: str
    event_type: str
    status: str
    attempt_count: int
    last_status_code: int | None
    last_duration_ms: int | None
    last_response: str
    last_error: str
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    created_at: datetime


class DeliveryListOut(Schema):
    items: list[DeliveryOut]


def _endpoint_dict(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {
        "id": endpoint.pk,
        "url": endpoint.url_shown,
        "kind": endpoint.kind,
        "events": endpoint.events,
        "customer": {"id": endpoint.customer_id, "name": endpoint.customer.name},
        "created_at": endpoint.created_at,
        "created_by": endpoint.created_by.get_username() if endpoint.created_by else None,
        "disabled_at": endpoint.disabled_at,
    }


def _delivery_dict(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.pk,
        "event_id": delivery.event_id,
        "event_type": delivery.event.type,
        "status": delivery.status,
        "attempt_count": delivery.attempt_count,
        "last_status_code": delivery.last_status_code,
        "last_duration_ms": delivery.last_duration_ms,
        "last_response": delivery.last_response,
        "last_error": delivery.last_error,
        "next_attempt_at": delivery.next_attempt_at if delivery.status == Delivery.Status.PENDING else None,
        "delivered_at": delivery.delivered_at,
        "created_at": delivery.created_at,
    }


def _field_error(field: str, code: str, message: str) -> ApiError:
    return ApiError(
        422,
        code,
        f"{field}: {message}",
        hint="Fix this field and send the request again.",
        validation_errors=[{"field": field, "message": message}],
    )


def _customer_resolve(request: HttpRequest, wanted: int | str | None) -> Customer:
    """The customer an endpoint is for, resolved as `rentals.orders.service` resolves a rent's (operators must name
    one)."""
    customers = selectors.customers_for_endpoints(user=request.user)
    if not customers.exists():
        raise ApiError(403, "forbidden", "Only a customer's admins add webhook endpoints; ask one of them.")
    if wanted is None:
        mine = list(customers[:2])
        if len(mine) != 1 or is_operator(request.user):
            raise _field_error("customer", "customer_required", "Say which customer this endpoint is for (id or name).")
        return mine[0]
    found = customer_get_named(customers=customers, wanted=wanted)
    if found is None:
        raise _field_error("customer", "unknown_customer", f"You may not add webhooks for a customer '{wanted}'.")
    return found


def _endpoint_for(request: HttpRequest, webhook_id: int, *, manage: bool = False) -> WebhookEndpoint:
    endpoint = selectors.endpoint_get_for_user(user=request.user, pk=webhook_id)
    if manage and not selectors.may_manage_endpoints(user=request.user, customer_id=endpoint.customer_id):
        raise ApiError(403, "forbidden", "You may not change this webhook endpoint.")
    return endpoint


@router.post(
    "",
    response={201: WebhookCreatedOut, **ERRORS},
    summary="Register a webhook endpoint",
    openapi_extra=body_schema(WebhookCreateIn),
)
def webhook_create(request: HttpRequest) -> HttpResponse:
    """Register a URL for signed events; the answer holds the `whsec_` secret, which is never shown again."""
    require_writer(request, "manage")
    # Read after the scope and role checks, so a refusal never depends on what was sent.
    payload = json_body(request.body, WebhookCreateIn)
    customer = _customer_resolve(request, payload.customer)
    try:
        endpoint, secret = services.endpoint_create(
            customer=customer,
            url=payload.url,
            events=payload.events,
            created_by=request.user,  # type: ignore[arg-type]
            kind=payload.kind,
        )
    except DjangoValidationError as exc:
        field = "url" if exc.code == "unsafe_url" else "events"
        if exc.code == "too_many_endpoints":
            raise ApiError(409, "too_many_endpoints", exc.messages[0], hint="Delete an endpoint first.") from exc
        raise _field_error(field, f"invalid_{field}", exc.messages[0]) from exc
    response = json_response({**_endpoint_dict(endpoint), "secret": secret}, status=201)
    response["Cache-Control"] = "no-store"
    return response


@router.get("", response={200: WebhookListOut, **ERRORS}, summary="List webhook endpoints")
def webhook_list(request: HttpRequest) -> HttpResponse:
    """The endpoints you may see (never their secrets)."""
    require_scope(request, "read")
    endpoints = list(selectors.endpoint_list_for_user(user=request.user)[:500])
    support_read_record(
        user=request.user, customer_ids=[e.customer_id for e in endpoints], what="webhook endpoints (API)"
    )
    return json_response({"items": [_endpoint_dict(endpoint) for endpoint in endpoints]})


@router.delete("/{webhook_id}", response={204: None, **ERRORS}, summary="Delete a webhook endpoint")
def webhook_delete(request: HttpRequest, webhook_id: int) -> HttpResponse:
    """Delete an endpoint: it receives nothing more."""
    require_writer(request, "manage")
    services.endpoint_delete(endpoint=_endpoint_for(request, webhook_id, manage=True))
    return HttpResponse(status=204)


@router.post("/{webhook_id}/test", response={202: DeliveryOut, **ERRORS}, summary="Send a test event")
def webhook_test(request: HttpRequest, webhook_id: int) -> HttpResponse:
    """Send a `webhook.test` event to this endpoint; follow it in its deliveries."""
    require_writer(request, "manage")
    endpoint = _endpoint_for(request, webhook_id, manage=True)
    _refuse_manual_send(request, endpoint)
    delivery = services.endpoint_send_test(endpoint=endpoint)
    return json_response(_delivery_dict(delivery), status=202)


def _refuse_manual_send(request: HttpRequest, endpoint: WebhookEndpoint) -> None:
    """Refuse a test send or redelivery to a disabled endpoint (it receives nothing: say so rather than make a
    delivery that fails at once; checked first, so a refusal spends no throttle budget), or over the throttle."""
    if endpoint.disabled_at is not None:
        raise ApiError(
            409,
            "webhook_disabled",
            f"This endpoint is disabled ({endpoint.disabled_reason or 'by a team change'}): it receives nothing.",
            hint="Delete it and register a new endpoint to receive events again.",
        )
    assert request.user.pk is not None  # authenticated by the key (require_scope ran first)
    wait = throttles.manual_send_retry_after(user_id=request.user.pk, endpoint_id=endpoint.pk)
    if wait is not None:
        raise ApiError(
            429,
            "webhook_test_throttled",
            throttles.throttled_message(wait),
            hint="Test sends and redeliveries are limited per user and per endpoint.",
            headers={"Retry-After": str(wait)},
        )


@router.get("/{webhook_id}/deliveries", response={200: DeliveryListOut, **ERRORS}, summary="An endpoint's delivery log")
def webhook_deliveries(request: HttpRequest, webhook_id: int) -> HttpResponse:
    """The endpoint's latest 100 deliveries, newest first."""
    require_scope(request, "read")
    endpoint = _endpoint_for(request, webhook_id)
    what = f"deliveries of webhook {endpoint.pk} (API)"
    support_read_record(user=request.user, customer_ids=[endpoint.customer_id], what=what)
    deliveries = selectors.delivery_list_for_endpoint(endpoint=endpoint)
    return json_response({"items": [_delivery_dict(delivery) for delivery in deliveries]})


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/redeliver",
    response={202: DeliveryOut, **ERRORS},
    summary="Redeliver an event",
)
def webhook_redeliver(request: HttpRequest, webhook_id: int, delivery_id: int) -> HttpResponse:
    """Send a delivery's event again, with the same `webhook-id`."""
    require_writer(request, "manage")
    endpoint = _endpoint_for(request, webhook_id, manage=True)
    delivery = selectors.delivery_get_for_endpoint(endpoint=endpoint, pk=delivery_id)
    _refuse_manual_send(request, endpoint)
    again = services.delivery_redeliver(delivery=delivery)
    return json_response(_delivery_dict(Delivery.objects.select_related("event").get(pk=again.pk)), status=202)
