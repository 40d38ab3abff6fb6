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
