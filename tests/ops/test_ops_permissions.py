"""Who may open the staff pages: customers get 403 everywhere, support reads but never writes, operators act."""

from __future__ import annotations

import pytest

from rentals.models import RentalEvent
from rentals.states import RentalStatus

pytestmark = pytest.mark.django_db

ACTIONS = ["retry", "reconcile", "confirm", "terminate", "cancel"]


def read_urls(rental) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        "/ops/",
        "/ops/panel/",
        "/ops/search/?q=acme",
        f"/ops/rentals/{rental.public_id}/",
        "/ops/usage/",
        "/ops/usage.csv",
        "/ops/audit/",
    ]


def action_urls(rental) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"/ops/rentals/{rental.public_id}/{action}/" for action in ACTIONS]


def test_customer_members_get_403_on_every_ops_url(make_rental, alice, bob, client_for) -> None:
    rental = make_rental()
    for user in (alice, bob):
        client = client_for(user)
        for url in read_urls(rental) + action_urls(rental):
            refused = client.get(url)
            assert refused.status_code == 403, url
            assert "These pages are for support and operators." in refused.content.decode(), "the page says why"
        for url in action_urls(rental):
            assert client.post(url, {"reason": "x", "confirm": "on"}).status_code == 403, url


def test_anonymous_visitors_are_sent_to_log_in(make_rental, client) -> None:
    rental = make_rental()
    for url in read_urls(rental) + action_urls(rental):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_support_reads_every_page_without_action_buttons(make_rental, sam, client_for) -> None:
    rental = make_rental(status=RentalStatus.QUEUED)
    client = client_for(sam)
    for url in read_urls(rental):
        assert client.get(url).status_code == 200, url
    page = client.get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert 'data-testid="actions"' not in page and "/cancel/" not in page


def test_support_writes_are_refused_with_403_and_change_nothing(make_rental, sam, client_for) -> None:
    rentals = {
        "retry": make_rental(status=RentalStatus.RETRYING),
        "reconcile": make_rental(status=RentalStatus.UNKNOWN),
        "confirm": make_rental(status=RentalStatus.UNKNOWN),
        "terminate": make_rental(status=RentalStatus.READY, cluster_id="cl-1"),
        "cancel": make_rental(status=RentalStatus.QUEUED),
    }
    client = client_for(sam)
    for action, rental in rentals.items():
        url = f"/ops/rentals/{rental.public_id}/{action}/"
        assert client.get(url).status_code == 403, url
        assert client.post(url, {"reason": "because", "confirm": "on", "outcome": "not_rented"}).status_code == 403
        rental.refresh_from_db()
    assert [r.status for r in rentals.values()] == [
        RentalStatus.RETRYING,
        RentalStatus.UNKNOWN,
        RentalStatus.UNKNOWN,
        RentalStatus.READY,
        RentalStatus.QUEUED,
    ]
    assert not RentalEvent.objects.filter(kind=RentalEvent.Kind.STAFF_ACTION).exists()


def test_operators_see_action_buttons_and_the_rent_on_behalf_link(make_rental, olga, client_for) -> None:
    rental = make_rental(status=RentalStatus.QUEUED)
    client = client_for(olga)
    page = client.get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert f"/ops/rentals/{rental.public_id}/cancel/" in page
    assert 'hx-confirm="' in page and 'name="confirm" required' in page
    assert "Rent for a customer" in client.get("/ops/").content.decode()


def test_the_ops_link_shows_for_staff_only(sam, alice, client_for) -> None:
    assert 'href="/ops/"' in client_for(sam).get("/ops/").content.decode()
    assert 'href="/ops/"' not in client_for(alice).get("/rentals/").content.decode()


def test_an_unknown_action_is_404_for_operators(make_rental, olga, client_for) -> None:
    rental = make_rental()
    assert client_for(olga).get(f"/ops/rentals/{rental.public_id}/explode/").status_code == 404
