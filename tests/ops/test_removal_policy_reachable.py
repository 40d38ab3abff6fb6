"""An operator finds a customer's removal policy where they look for a customer (the budgets list of the ops
pages, the customer's team page), and the Django admin lists the policies, changed through the same rule."""

from __future__ import annotations

import pytest

from rentals.models import CustomerRemovalPolicy
from rentals.removal.policy import removal_policy_set
from tests.conftest import _user

pytestmark = pytest.mark.django_db


def test_the_budgets_list_links_each_customers_policy_and_says_what_it_is(acme, globex, olga, client_for) -> None:
    removal_policy_set(customer=acme, default_hours=24, max_hours=72, actor=olga)
    assert '<a href="/billing/budgets/">Customers</a>' in client_for(olga).get("/ops/").content.decode()
    html = client_for(olga).get("/billing/budgets/").content.decode()
    acme_row = html.split(f'href="/customers/{acme.pk}/team/"')[1].split("</tr>")[0]
    assert f'href="/customers/{acme.pk}/removal-policy/"' in acme_row and "default 24 h, max 72 h" in acme_row
    globex_row = html.split(f'href="/customers/{globex.pk}/team/"')[1].split("</tr>")[0]
    assert f'href="/customers/{globex.pk}/removal-policy/"' in globex_row and "none" in globex_row


def test_the_team_page_links_it_for_staff_only(acme, alice, sam, client_for) -> None:
    link = f'href="/customers/{acme.pk}/removal-policy/"'
    assert link in client_for(sam).get(f"/customers/{acme.pk}/team/").content.decode()
    assert link not in client_for(alice).get(f"/customers/{acme.pk}/team/").content.decode(), "members get a 403 there"


def test_the_policy_page_leads_back_to_the_customer(acme, olga, client_for) -> None:
    html = client_for(olga).get(f"/customers/{acme.pk}/removal-policy/").content.decode()
    assert f'href="/customers/{acme.pk}/team/"' in html and 'aria-label="Operations"' in html


def test_the_admin_changes_a_policy_by_the_same_rule_and_records_who(acme, client_for) -> None:
    root = _user("root", superuser=True)
    client = client_for(root)
    assert "Customer removal policies" in client.get("/admin/").content.decode()
    refused = client.post(
        "/admin/rentals/customerremovalpolicy/add/", {"customer": acme.pk, "default_hours": 100, "max_hours": 10}
    )
    assert "The default cannot be above the maximum." in refused.content.decode()
    assert not CustomerRemovalPolicy.objects.exists()
    saved = client.post(
        "/admin/rentals/customerremovalpolicy/add/", {"customer": acme.pk, "default_hours": 10, "max_hours": 100}
    )
    assert saved.status_code == 302
    policy = CustomerRemovalPolicy.objects.get()
    assert (policy.default_hours, policy.max_hours, policy.updated_by) == (10, 100, root)
    assert client.get(f"/admin/rentals/customerremovalpolicy/{policy.pk}/delete/").status_code == 403
    assert "Delete" not in client.get(f"/admin/rentals/customerremovalpolicy/{policy.pk}/change/").content.decode()
