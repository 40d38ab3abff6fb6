"""Support reading a customer's rental through the customer pages or the API leaves an audit entry."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import Membership
from api.keys import api_key_create
from rentals.models import RentalEvent

pytestmark = pytest.mark.django_db


def support_views(rental) -> list[str]:  # type: ignore[no-untyped-def]
    events = RentalEvent.objects.filter(rental=rental, kind=RentalEvent.Kind.SUPPORT_VIEW)
    return list(events.values_list("actor__username", flat=True))


def api_client(user) -> tuple[Client, dict[str, str]]:  # type: ignore[no-untyped-def]
    _key, text = api_key_create(user=user, name="k", scopes=["read"])
    return Client(), {"X-API-Key": text}


def test_support_opening_a_rental_page_is_recorded_once_per_interval(rental, sam, client_for) -> None:
    client = client_for(sam)
    assert client.get(f"/rentals/{rental.public_id}/").status_code == 200
    assert support_views(rental) == ["sam"]
    client.get(f"/rentals/{rental.public_id}/")
    assert support_views(rental) == ["sam"], "a reload within the interval adds nothing"


def test_support_polling_the_progress_is_recorded(rental, sam, client_for) -> None:
    assert client_for(sam).get(f"/rentals/{rental.public_id}/progress/").status_code == 200
    assert support_views(rental) == ["sam"]


def test_the_customers_own_members_and_operators_leave_no_support_view(rental, alice, olga) -> None:
    for user in (alice, olga):
        client = Client()
        client.force_login(user)
        assert client.get(f"/rentals/{rental.public_id}/").status_code == 200
    assert support_views(rental) == []


def test_support_who_is_a_member_of_the_customer_reads_as_a_member(rental, sam, acme, client_for) -> None:
    Membership.objects.create(user=sam, customer=acme)
    client_for(sam).get(f"/rentals/{rental.public_id}/")
    assert support_views(rental) == []


def test_support_reading_a_rental_through_the_api_is_recorded(rental, sam) -> None:
    client, headers = api_client(sam)
    assert client.get(f"/api/v1/rentals/{rental.public_id}", headers=headers).status_code == 200
    assert support_views(rental) == ["sam"]


def test_support_listing_rentals_through_the_api_records_each_listed_rental(rental, sam, alice) -> None:
    client, headers = api_client(sam)
    listed = client.get("/api/v1/rentals", headers=headers).json()["items"]
    assert [item["id"] for item in listed] == [str(rental.public_id)]
    assert support_views(rental) == ["sam"]
    client.get("/api/v1/rentals", headers=headers)
    assert support_views(rental) == ["sam"]
    own, own_headers = api_client(alice)
    own.get("/api/v1/rentals", headers=own_headers)
    assert support_views(rental) == ["sam"], "the customer's own member is not support"
