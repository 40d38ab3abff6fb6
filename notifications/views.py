"""Profile pages: a customer's webhook endpoints (register, delete, test, delivery log, redeliver) and the
user's e-mail choices. Support reads every endpoint's log and changes nothing; operators act on any."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.audit import support_read_record
from accounts.users import request_user
from notifications import selectors, services, throttles
from notifications.forms import EmailPreferenceForm, WebhookEndpointForm
from notifications.models import WebhookEndpoint

READ_ONLY = "Support can look at webhooks but not change them."


@login_required
@require_http_methods(["GET", "POST"])
def webhook_list(request: HttpRequest) -> HttpResponse:
    """List the endpoints the user may see and register one; a new secret is rendered once, in this response."""
    customers = selectors.customers_for_endpoints(user=request.user)
    may_add = customers.exists()
    if request.method == "POST" and not may_add:
        raise PermissionDenied(READ_ONLY)
    form = WebhookEndpointForm(request.POST or None, customers=customers)
    new_secret = None
    if request.method == "POST" and form.is_valid():
        try:
            _endpoint, new_secret = services.endpoint_create(
                customer=form.cleaned_data["customer"],
                url=form.cleaned_data["url"],
                events=form.cleaned_data["subscription"],
                created_by=request_user(request),
                kind=form.cleaned_data["kind"] or None,
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            form = WebhookEndpointForm(customers=customers)
    endpoints = selectors.endpoint_list_for_user(user=request.user)
    support_read_record(user=request.user, customer_ids=[e.customer_id for e in endpoints], what="webhook endpoints")
    context = {"form": form, "may_add": may_add, "endpoints": endpoints, "new_secret": new_secret}
    response = render(request, "notifications/webhooks.html", context)
    response["Cache-Control"] = "no-store"  # the page may carry a secret shown once: never cache it
    return response


@login_required
def webhook_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """An endpoint and its delivery log (status, duration, answer excerpt, attempts, next try)."""
    endpoint = selectors.endpoint_get_for_user(user=request.user, pk=pk)
    support_read_record(user=request.user, customer_ids=[endpoint.customer_id], what=f"deliveries of webhook {pk}")
    return render(
        request,
        "notifications/webhook_detail.html",
        {
            "endpoint": endpoint,
            "deliveries": selectors.delivery_list_for_endpoint(endpoint=endpoint),
            "may_manage": selectors.may_manage_endpoints(user=request.user, customer_id=endpoint.customer_id),
        },
    )


def _managed_endpoint(request: HttpRequest, pk: int) -> WebhookEndpoint:
    """Return an endpoint this user may change; raise 404 for one they cannot see, 403 for one they only see."""
    endpoint = selectors.endpoint_get_for_user(user=request.user, pk=pk)
    if not selectors.may_manage_endpoints(user=request.user, customer_id=endpoint.customer_id):
        raise PermissionDenied(READ_ONLY)
    return endpoint


def _refused_manual_send(request: HttpRequest, endpoint: WebhookEndpoint) -> HttpResponse | None:
    """Refuse a test send or redelivery, with a message: to a disabled endpoint (it receives nothing; checked
    first, so a refusal spends no throttle budget), or over the throttle."""
    if endpoint.disabled_at is not None:
        why = endpoint.disabled_reason or "by a team change"
        messages.error(
            request, f"This endpoint is disabled ({why}): nothing is sent to it. Delete it and add a new one."
        )
        return redirect("notifications:webhook_detail", pk=endpoint.pk)
    wait = throttles.manual_send_retry_after(user_id=request_user(request).pk, endpoint_id=endpoint.pk)
    if wait is not None:
        messages.error(request, throttles.throttled_message(wait))
        return redirect("notifications:webhook_detail", pk=endpoint.pk)
    return None


@login_required
@require_POST
def webhook_test(request: HttpRequest, pk: int) -> HttpResponse:
    """Send a `webhook.test` event to this endpoint."""
    endpoint = _managed_endpoint(request, pk)
    if refused_send := _refused_manual_send(request, endpoint):
        return refused_send
    delivery = services.endpoint_send_test(endpoint=endpoint)
    messages.success(request, f"Test event {delivery.event_id} is on its way; its delivery appears below.")
    return redirect("notifications:webhook_detail", pk=endpoint.pk)


@login_required
@require_POST
def webhook_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete an endpoint: it receives nothing more."""
    endpoint = _managed_endpoint(request, pk)
    services.endpoint_delete(endpoint=endpoint)
    messages.success(request, f"Webhook endpoint {endpoint.url_shown} deleted.")
    return redirect("notifications:webhook_list")


@login_required
@require_POST
def webhook_redeliver(request: HttpRequest, pk: int, delivery_pk: int) -> HttpResponse:
    """Send a delivery's event again, with the same webhook-id."""
    endpoint = _managed_endpoint(request, pk)
    delivery = selectors.delivery_get_for_endpoint(endpoint=endpoint, pk=delivery_pk)
    if refused_send := _refused_manual_send(request, endpoint):
        return refused_send
    services.delivery_redeliver(delivery=delivery)
    messages.success(request, f"Event {delivery.event_id} will be delivered again (same webhook-id).")
    return redirect("notifications:webhook_detail", pk=endpoint.pk)


@login_required
@require_http_methods(["GET", "POST"])
def notification_preferences(request: HttpRequest) -> HttpResponse:
    """Choose which events reach the user by e-mail."""
    user = request_user(request)
    if request.method == "POST":
        form = EmailPreferenceForm(request.POST)
        if form.is_valid():
            services.email_preference_set(user=user, events=form.cleaned_data["events"])
            messages.success(request, "Saved. Only the events you ticked reach you by e-mail.")
            return redirect("notifications:preferences")
    else:
        form = EmailPreferenceForm(initial={"events": services.email_events_for(user=user)})
    return render(request, "notifications/preferences.html", {"form": form, "has_email": bool(user.email)})
