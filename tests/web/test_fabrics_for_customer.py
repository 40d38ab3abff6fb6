"""The fabrics page shows the offers of the customer the user acts for, read with that customer's Lium key: a
user in two customers on two accounts (or an operator) picks one; a customer not theirs is a clear 404."""

from __future__ import annotations

import re

import pytest

from accounts.models import Customer
from tests.conftest import Simulator

pytestmark = pytest.mark.django_db


def keys_that_listed_offers(simulator: Simulator) -> list[str]:
    """The simulator's key ids of the offer listings since this test began (each test resets its log)."""
    return [row["api_key_id"] for row in simulator.requests("offers")]


def test_a_member_of_two_customers_sees_the_offers_of_the_one_she_picks(
    dana, globex, simulator: Simulator, client_for
) -> None:
    html = client_for(dana).get("/fabrics/", {"customer": globex.pk}).content.decode()
    assert keys_that_listed_offers(simulator) == ["key-other"], "read with Globex's key"
    assert "Offers of Globex" in html
    assert re.search(rf'<option value="{globex.pk}" selected>Globex</option>', html), "the selector shows it"
    choose = re.findall(r'href="(/rent/\?[^"]+)"', html)
    assert choose and all(f"customer={globex.pk}" in link for link in choose), "the rent form rents for it too"


def test_without_a_choice_it_is_her_first_customer(dana, acme, simulator: Simulator, client_for) -> None:
    html = client_for(dana).get("/fabrics/").content.decode()
    assert keys_that_listed_offers(simulator) == ["key-main"]
    assert "Offers of Acme Research" in html


def test_a_customer_she_does_not_belong_to_is_a_404_that_says_so(
    dana, simulator: Simulator, client_for, credential
) -> None:
    stranger = Customer.objects.create(name="Initech", customer_ref="initech", default_credential=credential)
    for wanted in (stranger.pk, "nonsense", "9" * 40, "\x00"):
        response = client_for(dana).get("/fabrics/", {"customer": wanted})
        assert response.status_code == 404
        assert "You do not act for that customer" in response.content.decode()
    assert keys_that_listed_offers(simulator) == [], "no offers were read"


def test_an_operator_sees_the_offers_of_any_customer(olga, dana, globex, simulator: Simulator, client_for) -> None:
    html = client_for(olga).get("/fabrics/", {"customer": globex.pk}).content.decode()
    assert keys_that_listed_offers(simulator) == ["key-other"] and "Offers of Globex" in html


def test_the_selector_picks_by_id_even_when_another_customer_is_named_like_that_id(
    olga, acme, globex, simulator: Simulator, client_for
) -> None:
    Customer.objects.filter(pk=acme.pk).update(name=str(globex.pk))  # a customer named like Globex's id
    html = client_for(olga).get("/fabrics/", {"customer": globex.pk}).content.decode()
    assert "Offers of Globex" in html


def test_a_customer_whose_credential_was_deactivated_shows_why_and_reads_nothing(
    dana, globex, simulator: Simulator, client_for
) -> None:
    globex.refresh_from_db()
    credential = globex.default_credential
    credential.active = False
    credential.save()
    html = client_for(dana).get("/fabrics/", {"customer": globex.pk}).content.decode()
    assert "Globex has no active Lium credential" in html
    assert keys_that_listed_offers(simulator) == [], "no offers were read with a deactivated key"


def test_a_fabric_no_longer_offered_leads_back_to_the_same_customers_fabrics(
    dana, globex, simulator: Simulator, client_for
) -> None:
    response = client_for(dana).get("/rent/", {"fabric": "no-such-fabric", "customer": globex.pk})
    assert response.status_code == 302 and response["Location"] == f"/fabrics/?customer={globex.pk}"
