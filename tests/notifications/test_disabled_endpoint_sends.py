"""A disabled endpoint (its maker left the team or stopped being an admin) receives nothing: a test send or a
redelivery to it is refused with a clear answer instead of a delivery that fails at once."""

from __future__ import annotations

import pytest
from django.test import Client

from api.keys import api_key_create
from billing.invitations import admin_set
from notifications.models import Delivery, WebhookEndpoint
from notifications.services import endpoint_send_test

pytestmark = pytest.mark.django_db


@pytest.fixture
def disabled(alice, carol, admins) -> WebhookEndpoint:  # type: ignore[no-untyped-def]
    """Carol, an admin, made it and tested it once; then she was demoted, which disabled it."""
    admins(alice, carol)
    endpoint = WebhookEndpoint.objects.get(pk=_make(carol))
    endpoint_send_test(endpoint=endpoint)
    admin_set(membership=carol.memberships.get(), admin=False)
    endpoint.refresh_from_db()
    assert endpoint.disabled_at is not None
    return endpoint


def _make(user) -> int:  # type: ignore[no-untyped-def]
    from notifications.services import endpoint_create

    customer = user.memberships.get().customer
    return endpoint_create(customer=customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=user)[0].pk


def test_the_api_refuses_a_test_send_or_redelivery_to_a_disabled_endpoint(alice, disabled) -> None:
    key = api_key_create(user=alice, name="k", scopes=["read", "manage"])[1]
    api = Client(headers={"X-API-Key": key})
    old = Delivery.objects.get(endpoint=disabled)
    before = Delivery.objects.count()

    for path in (
        f"/api/v1/webhooks/{disabled.pk}/test",
        f"/api/v1/webhooks/{disabled.pk}/deliveries/{old.pk}/redeliver",
    ):
        answer = api.post(path)
        assert answer.status_code == 409, answer.content
        error = answer.json()["error"]
        assert error["code"] == "webhook_disabled" and "disabled" in error["message"]

    assert Delivery.objects.count() == before


def test_the_page_refuses_a_test_send_or_redelivery_to_a_disabled_endpoint(client_for, alice, disabled) -> None:
    client = client_for(alice)
    old = Delivery.objects.get(endpoint=disabled)
    before = Delivery.objects.count()

    for path in (
        f"/profile/webhooks/{disabled.pk}/test/",
        f"/profile/webhooks/{disabled.pk}/deliveries/{old.pk}/redeliver/",
    ):
        page = client.post(path, follow=True).content.decode()
        assert "This endpoint is disabled" in page

    assert Delivery.objects.count() == before
