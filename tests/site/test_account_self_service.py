"""An account people look after themselves (django-allauth): password reset by e-mail, a new e-mail confirmed at
the new address, "sign out everywhere else", and a customer admin signing a member out. Each change is audited
(AccountChange) and e-mailed to the user."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from accounts.models import AccountChange
from billing.models import CustomerAdmin

# Transactional: allauth sends some notices when the request's transaction commits.
pytestmark = pytest.mark.django_db(transaction=True)


def sign_in(username: str, password: str = "pw") -> Client:  # noqa: S107 - the personas' password
    client = Client()
    response = client.post("/accounts/login/", {"login": username, "password": password})
    assert response.status_code == 302, "signed in"
    return client


def link_in(mail) -> str:  # type: ignore[no-untyped-def]
    return re.search(r"http://testserver(/\S+)", mail.body).group(1)  # type: ignore[union-attr]


def test_a_forgotten_password_is_reset_through_a_single_use_e_mailed_link(alice, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    response = Client().post("/accounts/password/reset/", {"email": "alice@example.com"})
    assert response.status_code == 302
    (mail,) = mailoutbox
    assert mail.to == ["alice@example.com"]
    link = link_in(mail)
    browser = Client()
    form = browser.get(link, follow=True)
    assert form.status_code == 200 and "password1" in form.content.decode()
    done = browser.post(
        form.redirect_chain[-1][0] if form.redirect_chain else link,
        {
            "password1": "a-new-long-passphrase-9",
            "password2": "a-new-long-passphrase-9",
        },
    )
    assert done.status_code == 302
    assert (
        Client().post("/accounts/login/", {"login": "alice", "password": "a-new-long-passphrase-9"}).status_code == 302
    )
    again = Client().get(link, follow=True)
    assert "password1" not in again.content.decode(), "the link works once"
    assert AccountChange.objects.filter(user=alice, what__contains="reset their password").exists()
    assert any("Password Reset" in m.subject for m in mailoutbox[1:]), "the user is told their password changed"


def test_an_unknown_address_gets_no_reset_link_and_the_page_does_not_say_so(alice, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    response = Client().post("/accounts/password/reset/", {"email": "nobody@example.com"})
    assert response.status_code == 302
    assert not any("/password/reset/key/" in m.body for m in mailoutbox)


def test_a_new_e_mail_is_confirmed_at_the_new_address_before_it_replaces_the_old(alice, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    client = sign_in("alice")
    response = client.post("/accounts/email/", {"email": "alice@acme.test", "action_add": ""})
    assert response.status_code == 302
    confirm = [m for m in mailoutbox if m.to == ["alice@acme.test"]]
    assert confirm, "the confirmation goes to the new address"
    alice.refresh_from_db()
    assert alice.email == "alice@example.com", "unchanged until confirmed"
    pending = client.get("/accounts/email/").content.decode()
    assert "alice@acme.test" in pending and "style=" not in pending, "no inline style: the CSP would refuse it"
    link = link_in(confirm[0])
    client.post(link)
    alice.refresh_from_db()
    assert alice.email == "alice@acme.test"
    assert AccountChange.objects.filter(user=alice, what__contains="to alice@acme.test").exists()
    assert any(m.to == ["alice@example.com"] and "Email Changed" in m.subject for m in mailoutbox), (
        "the old address is told"
    )


def test_sign_out_everywhere_else_ends_the_other_sessions_only(alice, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    laptop, phone = sign_in("alice"), sign_in("alice")
    page = laptop.get("/accounts/sessions/")
    assert page.status_code == 200 and page.content.decode().count("127.0.0.1") >= 2
    assert laptop.post("/accounts/sessions/").status_code == 302
    assert laptop.get("/rentals/").status_code == 200, "this session stays"
    assert phone.get("/rentals/").status_code == 302, "the other one is signed out"
    assert AccountChange.objects.filter(user=alice, what="1 session(s) signed out by themselves").exists()
    assert any(m.to == ["alice@example.com"] and "signed out" in m.subject for m in mailoutbox)


def test_a_customer_admin_lists_a_members_sessions_and_signs_them_out(alice, carol, bob, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    CustomerAdmin.objects.create(membership=alice.memberships.get())
    acme = alice.memberships.get().customer
    carols = sign_in("carol")
    membership = carol.memberships.get()
    admin = sign_in("alice")
    page = admin.get(f"/customers/{acme.pk}/team/members/{membership.pk}/sessions/")
    assert page.status_code == 200 and "127.0.0.1" in page.content.decode()
    response = admin.post(f"/customers/{acme.pk}/team/members/{membership.pk}/sessions/end/")
    assert response.status_code == 302
    assert carols.get("/rentals/").status_code == 302, "carol is signed out"
    assert admin.get("/rentals/").status_code == 200, "alice is not"
    assert AccountChange.objects.filter(user=carol, actor=alice, what__contains="signed out by alice").exists()
    assert any(m.to == ["carol@example.com"] and "alice" in m.body for m in mailoutbox)
    # Another customer's admin cannot reach Acme's members.
    bobs = sign_in("bob")
    assert bobs.get(f"/customers/{acme.pk}/team/members/{membership.pk}/sessions/").status_code == 404


def test_a_password_change_is_audited_and_e_mailed(alice, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    client = sign_in("alice")
    response = client.post(
        "/accounts/password/change/",
        {"oldpassword": "pw", "password1": "another-long-passphrase-7", "password2": "another-long-passphrase-7"},
    )
    assert response.status_code == 302
    assert User.objects.get(pk=alice.pk).check_password("another-long-passphrase-7")
    assert AccountChange.objects.filter(user=alice, what="changed their password").exists()
    assert any(m.to == ["alice@example.com"] and "Password Changed" in m.subject for m in mailoutbox)


@pytest.mark.parametrize("login", ["alice", "bob", "sam", "olga", "admin", "alice@acme.example"])
def test_the_demo_logins_sign_in_through_allauth(login: str, settings) -> None:  # type: ignore[no-untyped-def]
    call_command("seed_demo")
    call_command("seed_demo")  # run twice, as `make run` does at every start
    response = Client().post("/accounts/login/", {"login": login, "password": settings.DEMO_PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
