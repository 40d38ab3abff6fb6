"""A team change takes access away at once: a removed or demoted person's webhooks stop, their invitation links
stop working, and an invitation is claimed in one transaction with the account it creates."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from accounts.models import Membership
from billing import invitations
from billing.invitations import admin_set, invitation_accept, invitation_create
from billing.models import CustomerAdmin, Invitation
from notifications import events as ev
from notifications.models import Delivery, WebhookEndpoint
from notifications.services import endpoint_create, event_emit

PASSWORD = "a-long pass 123"


@pytest.fixture
def alice_admin(alice, acme):  # type: ignore[no-untyped-def]
    admin_set(membership=Membership.objects.get(user=alice, customer=acme), admin=True)
    return alice


def _membership(user: User) -> Membership:
    return Membership.objects.get(user=user)


def _carols_endpoint(carol: User) -> WebhookEndpoint:
    endpoint, _secret = endpoint_create(
        customer=_membership(carol).customer, url="http://127.0.0.1:9/carol", events=["*"], created_by=carol
    )
    return endpoint


def test_a_removed_member_no_longer_receives_the_customers_events(
    client_for, alice_admin, carol, acme, make_ready_rental
) -> None:
    """Carol registered a webhook for every event; once removed, `rental.ready` (SSH lines) never reaches it."""
    rental = make_ready_rental(acme)
    endpoint = _carols_endpoint(carol)
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    pending = Delivery.objects.get(endpoint=endpoint)
    assert pending.status == Delivery.Status.PENDING

    client_for(alice_admin).post(f"/customers/{acme.pk}/team/members/{_membership(carol).pk}/remove/")

    endpoint.refresh_from_db()
    assert endpoint.disabled_at is not None and "carol" in endpoint.disabled_reason
    pending.refresh_from_db()
    assert pending.status == Delivery.Status.FAILED and "disabled" in pending.last_error  # deliveries stop too
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    assert Delivery.objects.filter(endpoint=endpoint).count() == 1  # nothing new for her server
    page = client_for(alice_admin).get("/profile/webhooks/").content.decode()
    assert "Disabled" in page and "carol" in page  # the admin sees why it stopped (and may delete it)


def test_a_demoted_admin_keeps_no_webhook_either(client_for, alice_admin, carol, acme) -> None:
    admin_set(membership=_membership(carol), admin=True)
    endpoint = _carols_endpoint(carol)
    other = endpoint_create(customer=acme, url="http://127.0.0.1:9/alice", events=["*"], created_by=alice_admin)[0]
    client_for(alice_admin).post(f"/customers/{acme.pk}/team/members/{_membership(carol).pk}/admin/", {"admin": "0"})
    endpoint.refresh_from_db()
    other.refresh_from_db()
    assert endpoint.disabled_at is not None
    assert other.disabled_at is None  # only what the demoted person made


def test_a_demoted_admin_cannot_come_back_with_an_admin_link_made_earlier(client_for, alice_admin, carol, acme) -> None:
    admin_set(membership=_membership(carol), admin=True)
    carol_client = client_for(carol)
    link = invitation_create(customer=acme, created_by=carol, role=Invitation.Role.ADMIN).token
    admin_set(membership=_membership(carol), admin=False)  # the service the team page calls

    response = Client().get(f"/invite/{link}/", follow=True)
    assert response.status_code == 410
    carol_client = Client()
    carol_client.force_login(carol)
    assert carol_client.post(f"/invite/{link}/", follow=True).status_code == 410
    assert not CustomerAdmin.objects.filter(membership__user=carol).exists()
    # ...so she cannot remove the admin who demoted her.
    alice_membership = _membership(alice_admin)
    refused = carol_client.post(f"/customers/{acme.pk}/team/members/{alice_membership.pk}/remove/")
    assert refused.status_code == 403
    assert "Only this customer&#x27;s admins and operators can change its team" in refused.content.decode()
    assert Membership.objects.filter(pk=alice_membership.pk).exists()


def test_a_removed_admins_links_all_stop_working(client_for, alice_admin, carol, acme) -> None:
    admin_set(membership=_membership(carol), admin=True)
    member_link = invitation_create(customer=acme, created_by=carol).token
    admin_link = invitation_create(customer=acme, created_by=carol, role=Invitation.Role.ADMIN).token
    alices_link = invitation_create(customer=acme, created_by=alice_admin).token
    client_for(alice_admin).post(f"/customers/{acme.pk}/team/members/{_membership(carol).pk}/remove/")
    assert Client().get(f"/invite/{member_link}/", follow=True).status_code == 410
    assert Client().get(f"/invite/{admin_link}/", follow=True).status_code == 410
    assert Client().get(f"/invite/{alices_link}/", follow=True).status_code == 200  # only hers
    assert Invitation.objects.filter(created_by=carol, revoked_at__isnull=False).count() == 2


def test_acceptance_rechecks_the_maker_even_when_nothing_revoked_the_link(alice_admin, carol, bob, acme) -> None:
    """Revocation on demotion is one guard; acceptance checks the maker itself too (a role changed elsewhere)."""
    admin_set(membership=_membership(carol), admin=True)
    token = invitation_create(customer=acme, created_by=carol, role=Invitation.Role.ADMIN).token
    CustomerAdmin.objects.filter(membership__user=carol).delete()  # e.g. by an operator in the admin
    with pytest.raises(ValidationError, match="no longer"):
        invitation_accept(token=token, user=bob)
    assert not bob.memberships.filter(customer=acme).exists()


def _revoke_after_lookup(monkeypatch: pytest.MonkeyPatch, **change: Any) -> None:
    """Make the invitation change (revoked, used, customer paused) just after it was looked up: the race."""
    real_find = invitations.invitation_find

    def find_then_change(**kwargs: Any) -> Invitation:
        found = real_find(**kwargs)
        if "customer_active" in change:
            type(found.customer).objects.filter(pk=found.customer_id).update(active=change["customer_active"])
        else:
            Invitation.objects.filter(pk=found.pk).update(**change)
        return found

    monkeypatch.setattr(invitations, "invitation_find", find_then_change)


@pytest.mark.parametrize(
    "change", [{"revoked_at": "2030-06-01T00:00:00Z"}, {"customer_active": False}], ids=["revoked", "paused"]
)
def test_an_invitation_changed_between_lookup_and_claim_is_refused(monkeypatch, alice_admin, bob, acme, change) -> None:
    token = invitation_create(customer=acme, created_by=alice_admin).token
    _revoke_after_lookup(monkeypatch, **change)
    with pytest.raises(ValidationError):
        invitation_accept(token=token, user=bob)
    assert not bob.memberships.filter(customer=acme).exists()


def test_a_link_used_twice_at_once_leaves_no_orphan_account(monkeypatch, alice_admin, carol, acme) -> None:
    """The other tab claims the link between this sign-up's lookup and its claim: no account is left behind."""
    token = invitation_create(customer=acme, created_by=alice_admin).token
    _revoke_after_lookup(monkeypatch, used_at="2030-06-01T00:00:00Z", used_by=carol)
    response = Client().post(
        f"/invite/{token}/", {"username": "dana", "password1": PASSWORD, "password2": PASSWORD}, follow=True
    )
    assert response.status_code == 410 and "already used" in response.content.decode()
    assert not User.objects.filter(username="dana").exists()


CAROL_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFq8Qy0u0pNQf0TPaHq0c2d1aB0Yb8yq7m8o2bqAa1cZ carol@home"


def test_the_team_page_warns_of_a_removed_members_key_on_running_clusters(
    client_for, alice_admin, carol, acme, make_ready_rental
) -> None:
    """Carol's key sits on a cluster she rented and, saved in her profile, on one alice rented with it."""
    from accounts.models import SshPublicKey
    from rentals.models import Rental

    SshPublicKey.objects.create(user=carol, name="home", public_key=CAROL_KEY)
    hers = make_ready_rental(acme, pod_name="carols-job")
    Rental.objects.filter(pk=hers.pk).update(created_by=carol)
    with_her_key = make_ready_rental(acme, pod_name="shared-job")
    keys = f'"user_public_key":["{CAROL_KEY}",'.encode()
    body = bytes(with_her_key.request_body).replace(b'"user_public_key":[', keys)
    assert CAROL_KEY.encode() in body
    Rental.objects.filter(pk=with_her_key.pk).update(request_body=body)
    clean = make_ready_rental(acme, pod_name="clean-job")
    client = client_for(alice_admin)
    assert 'data-testid="left-keys"' not in client.get(f"/customers/{acme.pk}/team/").content.decode()

    client.post(f"/customers/{acme.pk}/team/members/{_membership(carol).pk}/remove/")

    page = client.get(f"/customers/{acme.pk}/team/").content.decode()
    assert 'data-testid="left-keys"' in page and "carol" in page
    assert "carols-job" in page and "shared-job" in page and "clean-job" not in page
    confirm = f"/rentals/{hers.public_id}/terminate/"
    assert confirm in page and f"/rentals/{with_her_key.public_id}/terminate/" in page
    assert client.get(confirm).status_code == 200  # the normal confirmation, then the normal terminate
    assert client.post(confirm).status_code == 302
    assert Rental.objects.get(pk=hers.pk).status == "terminating"
    assert "carols-job" not in client.get(f"/customers/{acme.pk}/team/").content.decode()
    assert Rental.objects.get(pk=clean.pk).status == "ready"


def test_every_other_grant_of_a_removed_member_ends_with_the_membership(
    client_for, alice_admin, carol, acme, make_ready_rental
) -> None:
    """Her API key and her session stay hers but see nothing of Acme; Acme's e-mails stop reaching her."""
    from api.keys import api_key_create
    from notifications.services import email_preference_set

    rental = make_ready_rental(acme)
    _key, text = api_key_create(user=carol, name="laptop", scopes=["read", "rent", "manage"])
    api = Client()
    carol.email = "carol@example.com"
    carol.save()
    email_preference_set(user=carol, events=[ev.RENTAL_READY])
    assert api.get(f"/api/v1/rentals/{rental.public_id}", headers={"X-API-Key": text}).status_code == 200
    assert event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk) is not None  # she is e-mailed

    client_for(alice_admin).post(f"/customers/{acme.pk}/team/members/{_membership(carol).pk}/remove/")

    assert api.get(f"/api/v1/rentals/{rental.public_id}", headers={"X-API-Key": text}).status_code == 404
    assert api.get("/api/v1/rentals", headers={"X-API-Key": text}).json()["items"] == []
    assert api.get("/api/v1/webhooks", headers={"X-API-Key": text}).json()["items"] == []
    assert event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk) is None  # nobody left to tell
    carol_web = Client()
    carol_web.force_login(carol)
    assert carol_web.get(f"/customers/{acme.pk}/team/").status_code == 404


def test_a_demoted_admins_api_key_no_longer_changes_webhooks(alice_admin, carol, acme) -> None:
    from api.keys import api_key_create

    admin_set(membership=_membership(carol), admin=True)
    _key, text = api_key_create(user=carol, name="k", scopes=["read", "manage"])
    alices = endpoint_create(customer=acme, url="http://127.0.0.1:9/alice", events=["*"], created_by=alice_admin)[0]
    admin_set(membership=_membership(carol), admin=False)
    refused = Client().delete(f"/api/v1/webhooks/{alices.pk}", headers={"X-API-Key": text})
    assert refused.status_code == 403
    assert WebhookEndpoint.objects.filter(pk=alices.pk).exists()


def test_a_membership_deleted_in_the_django_admin_ends_the_same_grants(carol, acme) -> None:
    """A superuser can delete a membership in the customer's admin page (an inline): the same grants end."""
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    admin_set(membership=_membership(carol), admin=True)
    endpoint = _carols_endpoint(carol)
    token = invitation_create(customer=acme, created_by=carol).token
    membership = _membership(carol)
    client = Client()
    client.force_login(root)
    page = client.get(f"/admin/accounts/customer/{acme.pk}/change/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    inline = page.context["inline_admin_formsets"][0].formset
    data = {key: value for key, value in form.initial.items() if value is not None}
    data.update({f"{inline.prefix}-TOTAL_FORMS": "1", f"{inline.prefix}-INITIAL_FORMS": "1"})
    data.update({f"{inline.prefix}-0-id": str(membership.pk), f"{inline.prefix}-0-user": str(carol.pk)})
    data.update({f"{inline.prefix}-0-customer": str(acme.pk), f"{inline.prefix}-0-DELETE": "on"})
    assert client.post(f"/admin/accounts/customer/{acme.pk}/change/", data).status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    endpoint.refresh_from_db()
    assert endpoint.disabled_at is not None and "no longer a member" in endpoint.disabled_reason
    assert Client().get(f"/invite/{token}/").status_code == 410
