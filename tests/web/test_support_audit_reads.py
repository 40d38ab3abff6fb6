"""Support reading a customer's data anywhere, not only a rental's page, leaves an audit entry.

A rental's own reads (its page, its downloads, a list row) go on its timeline; reads of a customer's other
data (webhook endpoints and deliveries, team, usage) are `SupportRead` rows. Members and operators leave none.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import SupportRead
from api.keys import api_key_create
from notifications.services import endpoint_create, endpoint_send_test
from rentals.models import Rental, RentalEvent
from tests.site.test_url_permissions import add_members

pytestmark = pytest.mark.django_db


def support_views(rental: Rental) -> list[str]:
    events = RentalEvent.objects.filter(rental=rental, kind=RentalEvent.Kind.SUPPORT_VIEW)
    return list(events.values_list("actor__username", flat=True))


def reads_of(customer) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    rows = SupportRead.objects.filter(customer=customer).order_by("id")
    return [(row.actor.username if row.actor else "", row.what) for row in rows]


def api_headers(user) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"X-API-Key": api_key_create(user=user, name="k", scopes=["read"])[1]}


@pytest.fixture
def running(rental: Rental) -> Rental:
    """Alice's rental, ready for an hour, with two members reachable over SSH."""
    rented_at = timezone.now() - timedelta(hours=1)
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1", rented_at=rented_at)
    add_members(rental)
    rental.refresh_from_db()
    return rental


@pytest.fixture
def endpoint(acme, alice):  # type: ignore[no-untyped-def]
    endpoint, _secret = endpoint_create(customer=acme, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice)
    endpoint_send_test(endpoint=endpoint)
    return endpoint


def test_support_downloading_the_ssh_config_and_an_env_file_is_recorded(running, sam, client_for) -> None:
    client = client_for(sam)
    assert client.get(f"/rentals/{running.public_id}/ssh-config/").status_code == 200
    assert support_views(running) == ["sam"]
    RentalEvent.objects.filter(kind=RentalEvent.Kind.SUPPORT_VIEW).delete()
    assert client.get(f"/rentals/{running.public_id}/env/0/").status_code == 200
    assert support_views(running) == ["sam"]


def test_support_listing_rentals_on_the_web_records_each_listed_rental(rental, sam, client_for) -> None:
    client = client_for(sam)
    assert str(rental.public_id) in client.get("/rentals/").content.decode()
    assert support_views(rental) == ["sam"]
    client.get("/rentals/")
    assert support_views(rental) == ["sam"], "a reload within the interval adds nothing"


def test_support_opening_another_customers_team_page_is_recorded(acme, alice, sam, client_for) -> None:
    assert "alice" in client_for(sam).get(f"/customers/{acme.pk}/team/").content.decode()
    assert reads_of(acme) == [("sam", "team page")]


def test_support_reading_webhook_endpoints_and_their_deliveries_is_recorded(acme, endpoint, sam, client_for) -> None:
    client = client_for(sam)
    assert endpoint.url in client.get("/profile/webhooks/").content.decode()
    assert client.get(f"/profile/webhooks/{endpoint.pk}/").status_code == 200
    headers = api_headers(sam)
    assert client.get("/api/v1/webhooks", headers=headers).json()["items"]
    assert client.get(f"/api/v1/webhooks/{endpoint.pk}/deliveries", headers=headers).json()["items"]
    assert reads_of(acme) == [
        ("sam", "webhook endpoints"),
        ("sam", f"deliveries of webhook {endpoint.pk}"),
        ("sam", "webhook endpoints (API)"),
        ("sam", f"deliveries of webhook {endpoint.pk} (API)"),
    ]


def test_support_reading_usage_on_the_page_the_csv_and_the_api_is_recorded(acme, running, sam, client_for) -> None:
    client = client_for(sam)
    month = f"{running.rented_at:%Y-%m}"
    assert running.pod_name in client.get("/usage/", {"month": month}).content.decode()
    assert running.pod_name in client.get("/usage.csv", {"month": month}).content.decode()
    assert client.get("/api/v1/usage", {"month": month}, headers=api_headers(sam)).json()["lines"]
    assert reads_of(acme) == [("sam", "usage page"), ("sam", "usage CSV"), ("sam", "usage (API)")]


def test_a_reread_within_the_interval_adds_nothing_and_a_later_one_does(acme, sam, client_for) -> None:
    client = client_for(sam)
    client.get(f"/customers/{acme.pk}/team/")
    client.get(f"/customers/{acme.pk}/team/")
    assert len(reads_of(acme)) == 1
    SupportRead.objects.update(at=timezone.now() - timedelta(minutes=11))
    client.get(f"/customers/{acme.pk}/team/")
    assert len(reads_of(acme)) == 2


def test_members_and_operators_reading_the_same_pages_leave_no_support_read(
    acme, running, endpoint, alice, olga
) -> None:
    for user in (alice, olga):
        client = Client()
        client.force_login(user)
        for path in ("/rentals/", "/profile/webhooks/", f"/profile/webhooks/{endpoint.pk}/", "/usage/", "/usage.csv"):
            assert client.get(path).status_code == 200, path
        client.get(f"/customers/{acme.pk}/team/")
        client.get(f"/rentals/{running.public_id}/ssh-config/")
    assert reads_of(acme) == [] and support_views(running) == []


def test_support_search_results_record_each_listed_rental(rental, sam, client_for) -> None:
    html = client_for(sam).get("/ops/search/", {"q": "acme"}).content.decode()
    assert rental.pod_name in html
    assert support_views(rental) == ["sam"]
    assert RentalEvent.objects.get(kind=RentalEvent.Kind.SUPPORT_VIEW).message == "Viewed by sam (search results)."
