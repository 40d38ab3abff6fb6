"""A `rented` rental whose nodes never appeared (the ops attention rule, `rentals.selectors.rented_without_members`)
tells its customer so: on the page, in the polled section and in the API, with what they can do; Terminate is
offered only when it can work (a delete goes by the cluster's id)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from rentals.models import ClusterMember, Rental
from tests.web.polls import logged_in, poller_url

pytestmark = pytest.mark.django_db

OVERDUE = "no node has appeared"
TERMINATE = "Terminate cluster…"


@pytest.fixture
def rented(rental, settings):  # type: ignore[no-untyped-def]
    """Return a function that makes alice's order `rented` some minutes ago, with no member and no cluster id."""
    settings.RENT_MEMBERS_GRACE_SECONDS = 600

    def make(minutes_ago: int, cluster_id: str = "") -> Rental:
        rented_at = timezone.now() - timedelta(minutes=minutes_ago)
        Rental.objects.filter(pk=rental.pk).update(
            status="rented", rented_at=rented_at, cluster_id=cluster_id, version=rental.version + 1
        )
        rental.refresh_from_db()
        return rental

    return make


def banner(html: str) -> str:
    return html.split('class="banner', 1)[1].split("</div>", 1)[0]


def test_the_page_says_lium_confirmed_it_but_no_node_appeared_and_what_to_do(rented, alice) -> None:
    rental = rented(11)
    html = logged_in(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    text = banner(html)
    assert "Lium confirmed the rental" in text and OVERDUE in text and "within 10 min" in text
    assert "Support has been alerted" in text and "reconcile" in text
    assert "wait" in text and "Terminate becomes possible once the cluster is found" in text
    assert TERMINATE not in html, "without the cluster's id a delete could not name it"


def test_terminate_is_offered_when_the_cluster_id_is_known(rented, alice) -> None:
    rental = rented(11, cluster_id="cl-9")
    html = logged_in(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    assert OVERDUE in banner(html) and "terminate the cluster" in banner(html)
    assert TERMINATE in html


def test_within_the_grace_or_once_a_node_appeared_the_nodes_are_starting(rented, alice) -> None:
    rental = rented(2, cluster_id="cl-9")
    browser = logged_in(alice)
    assert "The nodes are starting" in browser.get(f"/rentals/{rental.public_id}/").content.decode()
    rental = rented(11, cluster_id="cl-9")
    ClusterMember.objects.create(rental=rental, pod_id="p-1", status="PENDING")
    html = browser.get(f"/rentals/{rental.public_id}/").content.decode()
    assert "The nodes are starting" in html and OVERDUE not in html


def test_the_open_page_learns_it_when_the_grace_runs_out_though_nothing_was_written(
    rented, alice, carol, monkeypatch: pytest.MonkeyPatch
) -> None:
    rental = rented(2)
    alices, carols = logged_in(alice), logged_in(carol)
    carol_poll = poller_url(carols.get(f"/rentals/{rental.public_id}/").content.decode())
    page = alices.get(f"/rentals/{rental.public_id}/").content.decode()
    # A write before the grace runs out: alice's poll renders (and keeps) the section of the new version.
    Rental.objects.filter(pk=rental.pk).update(version=rental.version + 1)
    html = alices.get(poller_url(page)).content.decode()
    assert "Attempts" in html and OVERDUE not in html
    assert "Attempts" not in alices.get(poller_url(html)).content.decode(), "nothing changed since"

    later = timezone.now() + timedelta(minutes=9)
    monkeypatch.setattr(timezone, "now", lambda: later)
    html = alices.get(poller_url(html)).content.decode()
    assert OVERDUE in html and 'hx-swap-oob="true"' in html, "a poll of the same version gets the news"
    assert TERMINATE not in html
    assert "Attempts" not in alices.get(poller_url(html)).content.decode(), "then it is unchanged again"
    assert OVERDUE in carols.get(carol_poll).content.decode(), "the section kept from before is not reused"


def test_the_api_explains_it_too(rented, alice) -> None:
    rental = rented(11)
    _key, secret = api_key_create(user=alice, name="k", scopes=["read"])
    answer = Client().get(f"/api/v1/rentals/{rental.public_id}", headers={"X-API-Key": secret})
    assert answer.status_code == 200
    explanation = answer.json()["explanation"]
    assert "Lium confirmed the rental" in explanation and OVERDUE in explanation and "Support" in explanation
    listed = Client().get("/api/v1/rentals", headers={"X-API-Key": secret}).json()["items"][0]
    assert listed["explanation"] == explanation
