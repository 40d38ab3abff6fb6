"""Customer admins: invitation links (shown once, limited in time, used once), joining only the inviting
customer, removing members of their own customer only, and their budget."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Membership
from billing.invitations import admin_set, invitation_create
from billing.models import CustomerAdmin, CustomerBudget, Invitation


@pytest.fixture
def alice_admin(alice, acme):  # type: ignore[no-untyped-def]
    admin_set(membership=Membership.objects.get(user=alice, customer=acme), admin=True)
    return alice


def invite_link(client: Client, customer_id: int, role: str = "member") -> str:
    response = client.post(f"/customers/{customer_id}/team/invite/", {"role": role}, follow=True)
    assert response.status_code == 200
    match = re.search(r'data-testid="invitation-link">([^<]+)<', response.content.decode())
    assert match, "the link is shown"
    return match.group(1).replace("http://testserver", "")


def test_an_invited_person_signs_up_joins_only_that_customer_and_sees_nothing_else(
    client_for, alice_admin, acme, globex, bob, make_ready_rental, june_clock
) -> None:
    acme_job = make_ready_rental(acme, pod_name="acme-job")
    globex_job = make_ready_rental(globex, pod_name="globex-job")
    link = invite_link(client_for(alice_admin), acme.pk)
    assert Invitation.objects.get().token_sha256 not in link  # only the hash is stored

    newcomer = Client()
    landed = newcomer.get(link, follow=True)  # the token moves into the session; the page's URL holds none
    assert landed.redirect_chain == [("/invite/", 302)] and "Join Acme Research" in landed.content.decode()
    form = {"username": "dana", "password1": "a-long pass 123", "password2": "a-long pass 123"}
    response = newcomer.post("/invite/", form)
    assert response.status_code == 302

    dana = User.objects.get(username="dana")
    assert list(dana.memberships.values_list("customer__name", flat=True)) == ["Acme Research"]
    assert newcomer.get(f"/rentals/{acme_job.public_id}/").status_code == 200  # logged in, sees Acme's
    assert newcomer.get(f"/rentals/{globex_job.public_id}/").status_code == 404
    assert "globex-job" not in newcomer.get("/rentals/").content.decode()
    assert newcomer.get(f"/customers/{globex.pk}/team/").status_code == 404


def test_the_link_is_shown_once_and_works_once(client_for, alice_admin, acme, bob) -> None:
    client = client_for(alice_admin)
    link = invite_link(client, acme.pk)
    assert link not in client.get(f"/customers/{acme.pk}/team/").content.decode()

    bob_client = client_for(bob)
    assert bob_client.post(link).status_code == 302  # a logged-in user joins with one click
    assert set(bob.memberships.values_list("customer__name", flat=True)) == {"Globex", "Acme Research"}

    again = Client().get(link)
    assert again.status_code == 410 and "already used" in again.content.decode()


def test_an_expired_link_is_refused(alice_admin, acme, june_clock, settings) -> None:
    settings.INVITATION_VALID_HOURS = 2
    new = invitation_create(customer=acme, created_by=alice_admin)
    june_clock.advance(hours=2, seconds=1)
    response = Client().get(f"/invite/{new.token}/")
    assert response.status_code == 410 and "expired" in response.content.decode()
    response = Client().post(
        f"/invite/{new.token}/", {"username": "eve", "password1": "x-9long pw!", "password2": "x-9long pw!"}
    )
    assert response.status_code == 410
    assert not User.objects.filter(username="eve").exists()


def test_a_made_up_or_revoked_link_is_refused(client_for, alice_admin, acme) -> None:
    assert Client().get("/invite/inv_nothing-like-it/").status_code == 410
    new = invitation_create(customer=acme, created_by=alice_admin)
    client_for(alice_admin).post(f"/customers/{acme.pk}/team/invitations/{new.invitation.pk}/revoke/")
    assert Client().get(f"/invite/{new.token}/").status_code == 410


def test_an_admin_invitation_makes_an_admin(client_for, alice_admin, acme) -> None:
    link = invite_link(client_for(alice_admin), acme.pk, role="admin")
    Client().post(link, {"username": "fred", "password1": "f-long pass 99", "password2": "f-long pass 99"})
    assert CustomerAdmin.objects.filter(membership__user__username="fred", membership__customer=acme).exists()


def test_only_admins_and_operators_invite_and_remove(client_for, alice, carol, bob, sam, olga, acme) -> None:
    """Alice is a plain member here: she sees the team but may not change it."""
    assert client_for(alice).get(f"/customers/{acme.pk}/team/").status_code == 200
    assert client_for(alice).post(f"/customers/{acme.pk}/team/invite/").status_code == 403
    assert client_for(sam).post(f"/customers/{acme.pk}/team/invite/").status_code == 403
    assert client_for(bob).post(f"/customers/{acme.pk}/team/invite/").status_code == 404
    carol_membership = Membership.objects.get(user=carol)
    assert client_for(alice).post(f"/customers/{acme.pk}/team/members/{carol_membership.pk}/remove/").status_code == 403
    assert client_for(olga).post(f"/customers/{acme.pk}/team/members/{carol_membership.pk}/remove/").status_code == 302
    assert not Membership.objects.filter(pk=carol_membership.pk).exists()


def test_an_admin_removes_members_of_their_own_customer_only(client_for, alice_admin, carol, bob, acme, globex) -> None:
    client = client_for(alice_admin)
    bob_membership = Membership.objects.get(user=bob)
    # Bob's membership named under Acme's URL, or under Globex's: neither is Alice's to remove.
    assert client.post(f"/customers/{acme.pk}/team/members/{bob_membership.pk}/remove/").status_code == 404
    assert client.post(f"/customers/{globex.pk}/team/members/{bob_membership.pk}/remove/").status_code == 404
    assert Membership.objects.filter(pk=bob_membership.pk).exists()

    carol_membership = Membership.objects.get(user=carol)
    assert client.post(f"/customers/{acme.pk}/team/members/{carol_membership.pk}/remove/").status_code == 302
    assert not carol.memberships.exists()
    own = Membership.objects.get(user=alice_admin)
    client.post(f"/customers/{acme.pk}/team/members/{own.pk}/remove/")
    assert Membership.objects.filter(pk=own.pk).exists()  # nobody removes themselves


def test_an_admin_lowers_the_budget_but_not_above_the_operators(client_for, alice_admin, olga, acme) -> None:
    client_for(olga).post(
        f"/customers/{acme.pk}/budget/", {"monthly_budget_usd": "500", "grace_hours": "24", "enforce": "on"}
    )
    budget = CustomerBudget.objects.get(customer=acme)
    assert budget.monthly_budget_usd == 500 and budget.enforce

    client = client_for(alice_admin)
    response = client.post(f"/customers/{acme.pk}/budget/", {"customer_budget_usd": "900"})
    assert response.status_code == 400 and "at most the operators" in response.content.decode()
    assert client.post(f"/customers/{acme.pk}/budget/", {"customer_budget_usd": "200"}).status_code == 302
    budget.refresh_from_db()
    assert budget.effective_usd == 200 and budget.monthly_budget_usd == 500
    # The admin's form never changes the operators' fields, even if it sends them.
    client.post(f"/customers/{acme.pk}/budget/", {"monthly_budget_usd": "99999", "customer_budget_usd": "100"})
    budget.refresh_from_db()
    assert budget.monthly_budget_usd == 500 and budget.customer_budget_usd == 100


def test_a_removed_member_loses_access_at_once(client_for, alice_admin, carol, acme, make_ready_rental) -> None:
    rental = make_ready_rental(acme)
    carol_client = Client()
    carol_client.force_login(carol)
    assert carol_client.get(f"/rentals/{rental.public_id}/").status_code == 200
    client_for(alice_admin).post(f"/customers/{acme.pk}/team/members/{Membership.objects.get(user=carol).pk}/remove/")
    assert carol_client.get(f"/rentals/{rental.public_id}/").status_code == 404


def test_invitations_expire_after_the_configured_time(alice_admin, acme, june_clock, settings) -> None:
    settings.INVITATION_VALID_HOURS = 72
    new = invitation_create(customer=acme, created_by=alice_admin)
    assert new.invitation.expires_at - june_clock.now == timedelta(hours=72)
