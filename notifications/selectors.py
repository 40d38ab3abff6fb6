"""Reads on endpoints and deliveries, scoped to the user: members see their customers', staff see all."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.http import Http404

from accounts.models import Customer
from accounts.roles import is_operator, is_staff_reader
from notifications.models import Delivery, WebhookEndpoint

User = AbstractBaseUser | AnonymousUser


def endpoint_list_for_user(*, user: User) -> QuerySet[WebhookEndpoint]:
    """Return the endpoints the user may see: support and operators all, members their customers'."""
    endpoints = WebhookEndpoint.objects.select_related("customer", "created_by")
    if is_staff_reader(user):
        return endpoints
    if not user.is_authenticated:
        return endpoints.none()
    return endpoints.filter(customer__memberships__user_id=user.pk)


def endpoint_get_for_user(*, user: User, pk: int) -> WebhookEndpoint:
    """Return one endpoint the user may see, or raise Http404 (its existence is not revealed)."""
    try:
        return endpoint_list_for_user(user=user).get(pk=pk)
    except (WebhookEndpoint.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such webhook endpoint.") from exc


def _administered(user: User) -> QuerySet[Customer]:
    # The customers the user is an admin of (billing's CustomerAdmin, read through the membership so this app
    # does not import billing, which imports it).
    if user.pk is None:
        return Customer.objects.none()
    return Customer.objects.filter(memberships__user_id=user.pk, memberships__admin_role__isnull=False)


def may_manage_endpoints(*, user: User, customer_id: int) -> bool:
    """Return whether the user may add, delete, test or redeliver for this customer: its admins and operators
    (plain members and support read only): an endpoint receives SSH lines, so it is an admin's decision."""
    if is_operator(user):
        return True
    if not user.is_authenticated or is_staff_reader(user):
        return False
    return _administered(user).filter(pk=customer_id).exists()


def customers_for_endpoints(*, user: User) -> QuerySet[Customer]:
    """Return the customers the user may register endpoints for: operators any, admins their own."""
    if is_operator(user):
        return Customer.objects.filter(active=True)
    if not user.is_authenticated or is_staff_reader(user):
        return Customer.objects.none()
    return _administered(user).filter(active=True)


def delivery_list_for_endpoint(*, endpoint: WebhookEndpoint, limit: int = 100) -> list[Delivery]:
    """Return the endpoint's latest deliveries, newest first (the delivery log)."""
    return list(Delivery.objects.filter(endpoint=endpoint).select_related("event")[:limit])


def delivery_get_for_endpoint(*, endpoint: WebhookEndpoint, pk: int) -> Delivery:
    try:
        return Delivery.objects.select_related("event").get(pk=pk, endpoint=endpoint)
    except (Delivery.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such delivery.") from exc
