"""Offboarding ends every grant at once: a removed member's pending e-mails, a deactivated user's webhooks and
links, a deleted account's endpoints; and a former member added by an operator is still named when their key
sits on a running cluster (DESIGN principle 10, "Access follows membership, at once")."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Membership, SshPublicKey
from billing.invitations import admin_set, invitation_create
from notifications import events as ev
from notifications.delivery import delivery_attempt
from notifications.models import Delivery, WebhookEndpoint
from notifications.services import delivery_redeliver, email_preference_set, endpoint_create, event_emit
from rentals.models import Rental

pytestmark = pytest.mark.django_db

DAVE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHd8Qy0u0pNQf0TPaHq0c2d1aB0Yb8yq7m8o2bqAa1dA dave@home"


@pytest.fixture
def alice_admin(alice, acme):  # type: ignore[no-untyped-def]
    admin_set(membership=Membership.objects.get(user=alice, customer=acme), admin=True)
    return alice


def _emailed(user: User) -> None:
    user.email = f"{user.username}@example.com"
    user.save()
    email_preference_set(user=user, events=[ev.RENTAL_READY])


def _remove(client_for, admin: User, user: User, customer) -> None:  # type: ignore[no-untyped-def]
    membership = Membership.objects.get(user=user, customer=customer)
    client_for(admin).post(f"/customers/{customer.pk}/team/members/{membership.pk}/remove/")
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_a_removed_members_pending_email_ends_and_is_never_sent(
    client_for, alice_admin, carol, acme, make_ready_rental, mailoutbox
) -> None:
    """Her e-mail of `rental.ready` was pending (SMTP down, retried for 24 h) when an admin removed her."""
    rental = make_ready_rental(acme)  # before she subscribes: only the event below reaches her
    _emailed(carol)
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    pending = Delivery.objects.get(recipient=carol)
    assert pending.status == Delivery.Status.PENDING

    _remove(client_for, alice_admin, carol, acme)

    pending.refresh_from_db()
    assert pending.status == Delivery.Status.FAILED and "no longer a member" in pending.last_error
    delivery_attempt(delivery_id=pending.pk)
    assert [m.to for m in mailoutbox] == []


def test_an_old_email_redelivered_after_removal_does_not_reach_the_former_member(
    client_for, alice_admin, carol, acme, make_ready_rental, mailoutbox
) -> None:
    """Sending re-checks the membership: a redelivery made after she left is not sent to her."""
    rental = make_ready_rental(acme)  # before she subscribes: only the event below reaches her
    _emailed(carol)
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    old = Delivery.objects.get(recipient=carol)
    assert delivery_attempt(delivery_id=old.pk) == "delivered" and len(mailoutbox) == 1

    _remove(client_for, alice_admin, carol, acme)
    again = delivery_redeliver(delivery=old)

    assert delivery_attempt(delivery_id=again.pk) == "failed"
    again.refresh_from_db()
    assert "not a member" in again.last_error
    assert len(mailoutbox) == 1  # only the one sent while she was a member


def test_a_demoted_admin_still_gets_the_customers_emails(
    alice_admin, carol, acme, make_ready_rental, mailoutbox
) -> None:
    admin_set(membership=Membership.objects.get(user=carol), admin=True)
    rental = make_ready_rental(acme)  # before she subscribes: only the event below reaches her
    _emailed(carol)
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    admin_set(membership=Membership.objects.get(user=carol), admin=False)
    assert delivery_attempt(delivery_id=Delivery.objects.get(recipient=carol).pk) == "delivered"
    assert [m.to for m in mailoutbox] == [["carol@example.com"]]


def test_deactivating_a_user_ends_their_webhooks_links_and_emails(alice_admin, carol, acme, make_ready_rental) -> None:
    """The usual offboarding (unticking "active" in the Django admin) ends what removal ends."""
    rental = make_ready_rental(acme)
    admin_set(membership=Membership.objects.get(user=carol), admin=True)
    endpoint = endpoint_create(customer=acme, url="http://127.0.0.1:9/carol", events=["*"], created_by=carol)[0]
    token = invitation_create(customer=acme, created_by=carol).token
    _emailed(carol)
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    assert Delivery.objects.filter(status=Delivery.Status.PENDING).count() == 2  # her server and her inbox

    root = User.objects.create_superuser("root", "root@example.com", "pw")
    admin = Client()
    admin.force_login(root)
    page = admin.get(f"/admin/auth/user/{carol.pk}/change/")
    data = {key: value for key, value in page.context["adminform"].form.initial.items() if value is not None}
    data.update({"is_active": "", "groups": [], "user_permissions": [], "last_login_0": "", "last_login_1": ""})
    data.update({"date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"})
    assert admin.post(f"/admin/auth/user/{carol.pk}/change/", data).status_code == 302
    carol.refresh_from_db()
    assert not carol.is_active

    endpoint.refresh_from_db()
    assert endpoint.disabled_at is not None and "deactivated" in endpoint.disabled_reason
    assert not Delivery.objects.filter(status=Delivery.Status.PENDING).exists()
    assert Client().get(f"/invite/{token}/").status_code == 410
    event_emit(customer=acme, type=ev.RENTAL_READY, rental_id=rental.pk)
    assert not Delivery.objects.filter(endpoint=endpoint, status=Delivery.Status.PENDING).exists()


def test_saving_an_inactive_user_again_changes_nothing(alice_admin, carol, acme) -> None:
    endpoint = endpoint_create(customer=acme, url="http://127.0.0.1:9/carol", events=["*"], created_by=carol)[0]
    carol.is_active = False
    carol.save()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(disabled_at=None)  # e.g. re-enabled by hand since
    carol.first_name = "Carol"
    carol.save()
    endpoint.refresh_from_db()
    assert endpoint.disabled_at is None


def test_deleting_a_makers_account_disables_their_endpoint_before_it_loses_its_maker(alice_admin, carol, acme) -> None:
    """`created_by` becomes NULL when the account goes; the membership's deletion disabled the endpoint first."""
    endpoint = endpoint_create(customer=acme, url="http://127.0.0.1:9/carol", events=["*"], created_by=carol)[0]

    carol.delete()

    endpoint.refresh_from_db()
    assert endpoint.created_by_id is None
    assert endpoint.disabled_at is not None and "no longer a member" in endpoint.disabled_reason


def test_a_member_an_operator_added_and_removed_is_named_when_their_key_is_on_a_cluster(
    client_for, alice_admin, acme, make_ready_rental
) -> None:
    """Dave never rented and never used an invitation; his saved key is in a teammate's running order."""
    dave = User.objects.create_user("dave", password="pw")
    Membership.objects.create(user=dave, customer=acme)  # an operator added him (no invitation)
    SshPublicKey.objects.create(user=dave, name="home", public_key=DAVE_KEY)
    shared = make_ready_rental(acme, pod_name="shared-job")
    body = bytes(shared.request_body).replace(b'"user_public_key":[', f'"user_public_key":["{DAVE_KEY}",'.encode())
    Rental.objects.filter(pk=shared.pk).update(request_body=body)

    _remove(client_for, alice_admin, dave, acme)

    page = client_for(alice_admin).get(f"/customers/{acme.pk}/team/").content.decode()
    assert 'data-testid="left-keys"' in page and "dave" in page and "shared-job" in page


def test_a_former_member_who_rejoined_is_not_listed(client_for, alice_admin, acme, make_ready_rental) -> None:
    dave = User.objects.create_user("dave", password="pw")
    Membership.objects.create(user=dave, customer=acme)
    SshPublicKey.objects.create(user=dave, name="home", public_key=DAVE_KEY)
    shared = make_ready_rental(acme, pod_name="shared-job")
    body = bytes(shared.request_body).replace(b'"user_public_key":[', f'"user_public_key":["{DAVE_KEY}",'.encode())
    Rental.objects.filter(pk=shared.pk).update(request_body=body)
    _remove(client_for, alice_admin, dave, acme)
    Membership.objects.create(user=dave, customer=acme)

    page = client_for(alice_admin).get(f"/customers/{acme.pk}/team/").content.decode()
    assert 'data-testid="left-keys"' not in page
