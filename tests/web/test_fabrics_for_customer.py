"""The fabrics page shows the offers of the customer the user acts for, read with that customer's Lium key: a
user in two customers on two accounts (or an operator) picks one; a customer not theirs is a clear 404."""

from __future__ import annotations

import re

import pytest

from accounts.models import Customer, Membership, UpstreamCredential
from tests.conftest import Simulator, _user

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(simulator: Simulator, acme, globex):  # type: ignore[no-untyped-def]
    """A member of Acme (the simulator's main key) and of Globex, which rents on another Lium account."""
    other = UpstreamCredential(name="other", base_url=simulator.api_url)
    other.set_secret("sim-other-key")
    other.save()
    Customer.objects.filter(pk=globex.pk).update(default_credential=other)
    user = _user("dana", customer=acme)
    Membership.objects.create(user=user, customer=globex)
    return user


def keys_that_listed_offers(simulator: Simulator, since: int) -> list[str]:
    rows = simulator.http.get("/_sim/requests", params={"route": "offers"}).raise_for_status().json()
    return [row["api_key_id"] for row in rows[since:]]


def offer_calls(simulator: Simulator) -> int:
    return len(simulator.http.get("/_sim/requests", params={"route": "offers"}).json())


def test_a_member_of_two_customers_sees_the_offers_of_the_one_she_picks(
    dana, globex, simulator: Simulator, client_for
) -> None:
    before = offer_calls(simulator)
    html = client_for(dana).get("/fabrics/", {"customer": globex.pk}).content.decode()
    assert keys_that_listed_offers(simulator, before) == ["key-other"], "read with Globex's key"
    assert "Offers of Globex" in html
    assert re.search(rf'<option value="{globex.pk}" selected>Globex</option>', html), "the selector shows it"
    choose = re.findall(r'href="(/rent/\?[^"]+)"', html)
    assert choose and all(f"customer={globex.pk}" in link for link in choose), "the rent form rents for it too"


def test_without_a_choice_it_is_her_first_customer(dana, acme, simulator: Simulator, client_for) -> None:
    before = offer_calls(simulator)
    html = client_for(dana).get("/fabrics/").content.decode()
    assert keys_that_listed_offers(simulator, before) == ["key-main"]
    assert "Offers of Acme Research" in html


def test_a_customer_she_does_not_belong_to_is_a_404_that_says_so(
    dana, simulator: Simulator, client_for, credential
) -> None:
    stranger = Customer.objects.create(name="Initech", customer_ref="initech", default_credential=credential)
    before = offer_calls(simulator)
    for wanted in (stranger.pk, "nonsense", "9" * 40, "\x00"):
        response = client_for(dana).get("/fabrics/", {"customer": wanted})
        assert response.status_code == 404
        assert "You do not act for that customer" in response.content.decode()
    assert keys_that_listed_offers(simulator, before) == [], "no offers were read"


def test_an_operator_sees_the_offers_of_any_customer(olga, dana, globex, simulator: Simulator, client_for) -> None:
    before = offer_calls(simulator)
    html = client_for(olga).get("/fabrics/", {"customer": globex.pk}).content.decode()
    assert keys_that_listed_offers(simulator, before) == ["key-other"] and "Offers of Globex" in html
