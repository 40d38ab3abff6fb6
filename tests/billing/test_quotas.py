"""Quotas: GPUs at once, active clusters and USD per hour, each admitted up to its bound and refused past it by
name; operators set them, a customer's admins only lower ones; the API answers quota_exceeded with the usage."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from accounts.models import Membership
from api.keys import api_key_create
from billing.invitations import admin_set
from billing.models import CustomerQuota
from billing.quotas import quota_set_by_customer, quota_set_by_operator
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.billing.conftest import terminate
from tests.conftest import SSH_KEY
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db


def order(*, nodes: int = 2, gpus: int = 8, price: str = "10.00") -> RentOrder:
    order.count += 1  # type: ignore[attr-defined]
    return RentOrder(
        fabric_id="fab-1",
        executor_ids=[f"q{order.count}-{n}" for n in range(nodes)],  # type: ignore[attr-defined]
        pod_name="quota",
        public_keys=[SSH_KEY],
        gpus_per_node=gpus,
        price_per_hour=Decimal(price),
    )


order.count = 0  # type: ignore[attr-defined]


def submit(customer, user, **kwargs) -> Rental:  # type: ignore[no-untyped-def]
    return rental_submit(user=user, customer=customer, order=order(**kwargs), customer_ref="acme")


def quotas(customer, gpus=None, clusters=None, hourly=None) -> None:  # type: ignore[no-untyped-def]
    quota_set_by_operator(
        customer=customer,
        max_gpus=gpus,
        max_clusters=clusters,
        max_hourly_usd=Decimal(hourly) if hourly is not None else None,
    )


def refusal(customer, user, **kwargs) -> ValidationError:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as refused:
        submit(customer, user, **kwargs)
    assert refused.value.code == "quota_exceeded"
    return refused.value


def test_the_gpu_quota_admits_an_order_up_to_it_and_refuses_one_past_it(acme, alice) -> None:
    quotas(acme, gpus=32)
    submit(acme, alice, nodes=2, gpus=8)
    submit(acme, alice, nodes=2, gpus=8)  # exactly 32
    refused = refusal(acme, alice, nodes=1, gpus=1)
    assert "Quota of GPUs at once reached" in refused.messages[0]
    assert "adds 1 to Acme Research's 32 in use, above its quota of 32 GPUs at once" in refused.messages[0]
    assert refused.details == {"quota": "gpus", "limit": "32", "usage": "32", "adding": "1"}  # type: ignore[attr-defined]
    assert Rental.objects.count() == 2


def test_ended_rentals_free_the_gpu_quota(acme, alice) -> None:
    quotas(acme, gpus=16)
    first = submit(acme, alice, nodes=2, gpus=8)
    refusal(acme, alice, nodes=2, gpus=8)
    Rental.objects.filter(pk=first.pk).update(status="ready", cluster_id="cl-1")
    terminate(first)
    assert submit(acme, alice, nodes=2, gpus=8).pk


def test_the_cluster_quota_admits_up_to_it_and_refuses_the_next(acme, alice) -> None:
    quotas(acme, clusters=2)
    submit(acme, alice)
    submit(acme, alice)
    refused = refusal(acme, alice)
    assert "Quota of active clusters reached" in refused.messages[0]
    assert refused.details["usage"] == "2"  # type: ignore[attr-defined]


def test_the_hourly_quota_admits_up_to_it_and_refuses_a_cent_more(acme, alice) -> None:
    quotas(acme, hourly="20.00")
    submit(acme, alice, price="10.00")
    submit(acme, alice, price="10.00")  # exactly $20/hour
    refused = refusal(acme, alice, price="0.01")
    assert "Quota of USD per hour reached" in refused.messages[0]
    assert "above its quota of $20.00 USD per hour" in refused.messages[0]


def test_another_customers_rentals_do_not_count(acme, globex, alice, bob) -> None:
    quotas(acme, clusters=1)
    submit(globex, bob)
    assert submit(acme, alice).pk


def test_the_teams_own_lower_quota_applies_and_may_not_exceed_the_operators(acme, alice) -> None:
    quotas(acme, gpus=32)
    quota_set_by_customer(customer=acme, own_max_gpus=8, own_max_clusters=None, own_max_hourly_usd=None)
    submit(acme, alice, nodes=1, gpus=8)
    assert "quota of 8 GPUs" in refusal(acme, alice, nodes=1, gpus=1).messages[0]
    with pytest.raises(ValidationError, match="at most the operators' 32"):
        quota_set_by_customer(customer=acme, own_max_gpus=33, own_max_clusters=None, own_max_hourly_usd=None)
    # An operator lowering theirs below the team's drops the team's (it would not bind any more).
    quotas(acme, gpus=4)
    assert CustomerQuota.objects.get(customer=acme).own_max_gpus is None


def test_operators_set_quotas_on_the_team_page_and_admins_only_lower_them(acme, alice, olga, client_for) -> None:
    saved = client_for(olga).post(
        f"/customers/{acme.pk}/quotas/", {"max_gpus": "16", "max_clusters": "", "max_hourly_usd": "12.50"}
    )
    assert saved.status_code == 302
    quota = CustomerQuota.objects.get(customer=acme)
    assert (quota.max_gpus, quota.max_clusters, quota.max_hourly_usd) == (16, None, Decimal("12.50"))

    admin_set(membership=Membership.objects.get(user=alice, customer=acme), admin=True)
    alice_client = client_for(alice)
    page = alice_client.get(f"/customers/{acme.pk}/team/").content.decode()
    assert 'data-testid="customer-quota-form"' in page and 'data-testid="operator-quota-form"' not in page
    above = alice_client.post(f"/customers/{acme.pk}/quotas/", {"own_max_gpus": "17"})
    assert above.status_code == 400
    assert "at most the operators&#x27; 16" in above.content.decode()
    # An operator's field sent by an admin is not theirs to set: only their own lower quotas are read.
    lower = alice_client.post(f"/customers/{acme.pk}/quotas/", {"own_max_gpus": "8", "max_gpus": "99"})
    assert lower.status_code == 302
    quota.refresh_from_db()
    assert (quota.max_gpus, quota.own_max_gpus) == (16, 8)
    bad = alice_client.post(f"/customers/{acme.pk}/quotas/", {"own_max_gpus": "-1"})
    assert bad.status_code == 400 and "greater than or equal to 0" in bad.content.decode()


def test_a_plain_member_cannot_set_quotas(acme, alice, client_for) -> None:
    assert client_for(alice).post(f"/customers/{acme.pk}/quotas/", {"own_max_gpus": "1"}).status_code == 403


# --- The rent form and the API --------------------------------------------------------------------------------

NODES = [node("n-1", "2.00"), node("n-2", "1.50"), node("n-3", "3.00"), node("n-4", "3.00")]


@pytest.fixture
def fake_offers(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_fakes.install(monkeypatch, lambda credential: NODES)


def test_the_api_answers_quota_exceeded_with_the_quota_and_the_usage(fake_offers, acme, alice) -> None:
    quotas(acme, gpus=16)
    _key, secret = api_key_create(user=alice, name="k", scopes=["read", "rent"])
    body = {"fabric_id": FABRIC, "executor_ids": ["n-1", "n-2"], "pod_name": "one", "ssh_public_keys": [SSH_KEY]}
    first = Client().post("/api/v1/rentals", body, content_type="application/json", headers={"X-API-Key": secret})
    assert first.status_code == 201, first.content
    body["executor_ids"] = ["n-3", "n-4"]
    second = Client().post("/api/v1/rentals", body, content_type="application/json", headers={"X-API-Key": secret})
    assert second.status_code == 422
    error = second.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert (error["quota"], error["limit"], error["usage"], error["adding"]) == ("gpus", "16", "16", "16")
    assert "Quota of GPUs at once reached" in error["message"]


def test_the_rent_form_shows_what_is_left_and_refuses_naming_the_quota(fake_offers, acme, alice, client_for) -> None:
    quotas(acme, gpus=8, hourly="100")
    client = client_for(alice)
    page = client.get("/rent/", {"fabric": FABRIC}).content.decode()
    assert "8 GPUs at once left of 8" in page and "$100.00 USD per hour left of $100.00" in page
    form = {
        "fabric": FABRIC,
        "customer": acme.pk,
        "submit_token": re.search(r'name="submit_token" value="([^"]+)"', page).group(1),  # type: ignore[union-attr]
        "template_id": re.search(r'<option value="([^"]+)" selected>', page).group(1),  # type: ignore[union-attr]
        "executor_ids": ["n-1", "n-2"],
        "pod_name": "two",
        "ssh_public_keys": SSH_KEY,
    }
    refused = client.post(f"/rent/?fabric={FABRIC}", form).content.decode()
    assert "Quota of GPUs at once reached: this order adds 16" in refused
    assert not Rental.objects.exists()
