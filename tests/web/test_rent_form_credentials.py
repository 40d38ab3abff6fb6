"""The rent form offers, checks and prices nodes with the chosen customer's credential, the one that rents."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from accounts.models import Customer, Membership, UpstreamCredential
from billing.models import CustomerQuota
from rentals.models import Rental
from tests.conftest import SSH_KEY
from tests.matching import must_search
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db

# Two Lium accounts offer different nodes of the same fabric at different prices.
LISTINGS = {
    "east": [node("east-1", "1.00"), node("east-2", "1.00")],
    "west": [node("west-1", "5.00"), node("west-2", "5.00")],
}


@pytest.fixture
def two_accounts(monkeypatch: pytest.MonkeyPatch, acme):  # type: ignore[no-untyped-def]
    """Acme rents on the "east" account, Globex on "west"; offers and templates come from fakes per account."""
    credentials = {}
    for name in ("east", "west"):
        credential = UpstreamCredential(name=name, base_url=f"http://{name}.lium.invalid/api")
        credential.set_secret(f"{name}-secret")
        credential.save()
        credentials[name] = credential
    Customer.objects.filter(pk=acme.pk).update(default_credential=credentials["east"])
    globex = Customer.objects.create(name="Globex", customer_ref="globex", default_credential=credentials["west"])

    offer_fakes.install(monkeypatch, lambda credential: LISTINGS[credential.name])
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    return {"acme": Customer.objects.get(pk=acme.pk), "globex": globex, **credentials}


def shown_nodes(html: str) -> list[str]:
    return re.findall(r'name="executor_ids" value="([^"]+)"', html)


def order_for(client, customer: Customer) -> dict[str, object]:  # type: ignore[no-untyped-def]
    html = client.get("/rent/", {"fabric": FABRIC, "customer": customer.pk, "cheapest": "2"}).content.decode()
    return {
        "fabric": FABRIC,
        "customer": customer.pk,
        "submit_token": must_search(r'name="submit_token" value="([^"]+)"', html).group(1),
        "template_id": must_search(r'name="template_id".*?<option value="([^"]+)" selected>', html, re.S).group(1),
        "executor_ids": re.findall(r'name="executor_ids" value="([^"]+)"[^>]*checked', html),
        "pod_name": "train-1",
        "ssh_public_keys": SSH_KEY,
    }


def test_an_operator_renting_for_the_second_customer_sees_and_rents_its_accounts_nodes(
    two_accounts, olga, client_for
) -> None:
    client = client_for(olga)
    globex = two_accounts["globex"]
    assert shown_nodes(client.get("/rent/", {"fabric": FABRIC, "customer": globex.pk}).content.decode()) == [
        "west-1",
        "west-2",
    ]
    data = order_for(client, globex)
    assert data["executor_ids"] == ["west-1", "west-2"] and data["template_id"] == "tpl-west"
    response = client.post(f"/rent/?fabric={FABRIC}", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    rental = Rental.objects.get()
    assert rental.customer == globex
    assert rental.credential == two_accounts["west"]
    assert rental.executor_ids == ["west-1", "west-2"]
    assert rental.price_per_hour == Decimal("80.00"), "priced with west's offers (2 nodes x 8 GPUs x $5)"


def test_the_hourly_quota_is_checked_with_the_chosen_accounts_prices(two_accounts, alice, client_for) -> None:
    # Alice belongs to both customers; Globex caps spend below what west's nodes cost.
    globex = two_accounts["globex"]
    Membership.objects.create(user=alice, customer=globex)
    CustomerQuota.objects.create(customer=globex, max_hourly_usd=Decimal("50"))
    client = client_for(alice)
    response = client.post(f"/rent/?fabric={FABRIC}", order_for(client, globex))
    assert response.status_code == 200
    assert "Quota of USD per hour reached" in response.content.decode()
    assert not Rental.objects.exists()


def test_the_order_summary_prices_the_chosen_customers_nodes(two_accounts, olga, client_for) -> None:
    client = client_for(olga)
    html = client.get(
        "/rent/summary/",
        {"fabric": FABRIC, "customer": two_accounts["globex"].pk, "executor_ids": ["west-1", "west-2"]},
    ).content.decode()
    assert "$80.00/hour" in html
