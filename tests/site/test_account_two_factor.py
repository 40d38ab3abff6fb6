"""Two-factor sign-in (django-allauth's TOTP and recovery codes): signing in with a code, a customer requiring it
of its team, staff required to have it in production, and API keys unaffected."""

from __future__ import annotations

import time

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, generate_totp_secret, hotp_value
from django.test import Client

from accounts.models import AccountChange
from api.keys import api_key_create
from billing.models import CustomerAdmin
from tests.site.test_production import PRODUCTION_ENV, manage

pytestmark = pytest.mark.django_db


def current_code(secret: str) -> str:
    return format_hotp_value(hotp_value(secret, int(time.time()) // 30))


def sign_in(username: str, password: str = "pw") -> tuple[Client, str]:  # noqa: S107 - the personas' password
    """Post the sign-in form; return the client and where it was sent."""
    client = Client()
    response = client.post("/accounts/login/", {"login": username, "password": password})
    return client, response.get("Location", "")


def enrol(user) -> str:  # type: ignore[no-untyped-def]
    secret = generate_totp_secret()
    TOTP.activate(user, secret)
    return secret


def test_a_user_with_totp_signs_in_with_a_code_after_the_password(alice) -> None:  # type: ignore[no-untyped-def]
    secret = enrol(alice)
    client, location = sign_in("alice")
    assert location == "/accounts/2fa/authenticate/", "the password alone does not sign in"
    assert client.get("/rentals/").status_code == 302, "not signed in yet"
    response = client.post("/accounts/2fa/authenticate/", {"code": current_code(secret)})
    assert response.status_code == 302
    assert client.get("/rentals/").status_code == 200


def test_a_wrong_code_does_not_sign_in_and_guessing_is_stopped(alice) -> None:  # type: ignore[no-untyped-def]
    enrol(alice)
    client, _ = sign_in("alice")
    answers = [client.post("/accounts/2fa/authenticate/", {"code": "000000"}) for _ in range(6)]
    assert all(answer.status_code == 200 for answer in answers)
    assert "Incorrect code" in answers[0].content.decode()
    assert "Too many" in answers[-1].content.decode(), "5 wrong codes per user, then a pause"
    assert client.get("/rentals/").status_code == 302


def test_a_recovery_code_signs_in_once(alice) -> None:  # type: ignore[no-untyped-def]
    enrol(alice)
    code = RecoveryCodes.activate(alice).get_unused_codes()[0]
    client, _ = sign_in("alice")
    assert client.post("/accounts/2fa/authenticate/", {"code": code}).status_code == 302
    assert client.get("/rentals/").status_code == 200
    again, _ = sign_in("alice")
    assert again.post("/accounts/2fa/authenticate/", {"code": code}).status_code == 200, "a used code is refused"


# Transactional: allauth announces an added authenticator when the request's transaction commits.
@pytest.mark.django_db(transaction=True)
def test_a_team_requiring_two_factor_sends_a_member_without_it_to_enrol_at_sign_in(alice, carol, mailoutbox) -> None:  # type: ignore[no-untyped-def]
    CustomerAdmin.objects.create(membership=alice.memberships.get())
    admin = Client()
    admin.force_login(alice)
    acme = alice.memberships.get().customer
    response = admin.post(f"/customers/{acme.pk}/team/two-factor/", {"require": "1"})
    assert response.status_code == 302
    acme.refresh_from_db()
    assert acme.require_two_factor
    assert AccountChange.objects.filter(actor=alice, what__contains="required two-factor").exists()

    client, location = sign_in("carol")
    assert location == "/"
    page = client.get("/rentals/")
    assert page.status_code == 302 and page["Location"] == "/accounts/2fa/totp/activate/", "enrol before anything"
    assert client.get(f"/customers/{acme.pk}/team/")["Location"] == "/accounts/2fa/totp/activate/"
    activate = client.get("/accounts/2fa/totp/activate/")
    assert activate.status_code == 200, "enrolment itself is reachable (the sign-in was just now)"
    secret = client.session["mfa.totp.secret"]
    done = client.post("/accounts/2fa/totp/activate/", {"code": current_code(secret)})
    assert done.status_code == 302
    assert Authenticator.objects.filter(user=carol, type="totp").exists()
    assert client.get("/rentals/").status_code == 200, "enrolled: every page again"
    assert AccountChange.objects.filter(user=carol, what="added an authenticator app").exists()
    assert any(mail.to == ["carol@example.com"] and "Authenticator" in mail.subject for mail in mailoutbox)


def test_a_plain_member_cannot_require_two_factor(alice, carol) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(carol)
    acme = carol.memberships.get().customer
    assert client.post(f"/customers/{acme.pk}/team/two-factor/", {"require": "1"}).status_code == 403
    acme.refresh_from_db()
    assert not acme.require_two_factor


def test_without_the_requirement_nobody_is_sent_to_enrol(alice) -> None:  # type: ignore[no-untyped-def]
    client, _ = sign_in("alice")
    assert client.get("/rentals/").status_code == 200


@pytest.mark.parametrize(("required", "sent_to_enrol"), [(True, True), (False, False)])
def test_staff_must_enrol_at_their_first_sign_in_when_required(olga, sam, settings, required, sent_to_enrol) -> None:  # type: ignore[no-untyped-def]
    # MFA_REQUIRED_FOR_STAFF is on in production (DASHBOARD_ENV=production), off by default elsewhere.
    settings.MFA_REQUIRED_FOR_STAFF = required
    for username in ("olga", "sam"):
        client, _ = sign_in(username)
        response = client.get("/ops/")
        assert (response.status_code == 302 and response["Location"] == "/accounts/2fa/totp/activate/") is sent_to_enrol


def test_staff_with_totp_are_not_sent_to_enrol(olga, settings) -> None:  # type: ignore[no-untyped-def]
    settings.MFA_REQUIRED_FOR_STAFF = True
    secret = enrol(olga)
    client, _ = sign_in("olga")
    client.post("/accounts/2fa/authenticate/", {"code": current_code(secret)})
    assert client.get("/ops/").status_code == 200


def test_api_keys_are_unaffected_by_two_factor(alice, settings) -> None:  # type: ignore[no-untyped-def]
    acme = alice.memberships.get().customer
    acme.require_two_factor = True
    acme.save()
    enrol(alice)
    _key, secret = api_key_create(user=alice, name="ci", scopes=["read"])
    response = Client().get("/api/v1/rentals", headers={"X-API-Key": secret})
    assert response.status_code == 200


def test_production_requires_two_factor_of_staff_by_default() -> None:
    code = "from django.conf import settings; print(settings.MFA_REQUIRED_FOR_STAFF)"
    result = manage("shell", "-c", code, env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True"


def test_production_refuses_to_start_with_two_factor_of_staff_switched_off() -> None:
    # "Operators and support must have it in production": no setting turns that off there.
    result = manage("check", env={**PRODUCTION_ENV, "MFA_REQUIRED_FOR_STAFF": "false"})
    assert result.returncode != 0
    assert "MFA_REQUIRED_FOR_STAFF cannot be off when DASHBOARD_ENV=production" in result.stderr


@pytest.mark.parametrize("required", [True, False])
def test_a_member_whose_team_requires_two_factor_cannot_switch_it_off(alice, required) -> None:  # type: ignore[no-untyped-def]
    acme = alice.memberships.get().customer
    acme.require_two_factor = required
    acme.save()
    secret = enrol(alice)
    client, _ = sign_in("alice")
    client.post("/accounts/2fa/authenticate/", {"code": current_code(secret)})
    assert client.post("/accounts/reauthenticate/", {"password": "pw"}).status_code == 302, "allauth asks again"
    response = client.post("/accounts/2fa/totp/deactivate/")
    assert Authenticator.objects.filter(user=alice, type="totp").exists() is required
    if required:
        assert response.status_code == 200 and "cannot deactivate" in response.content.decode()


def test_someone_without_a_password_sets_up_two_factor_right_after_signing_in(alice, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # People of a customer's SSO have no password here, and nothing else to re-authenticate with before they have
    # an authenticator: their sign-in just now (through their provider) is that check, as a password would be.
    from allauth.account.internal.flows.login import record_authentication

    alice.set_unusable_password()
    alice.save()
    client = Client()
    client.force_login(alice)
    request = type("R", (), {"session": client.session})()
    record_authentication(request, alice, "socialaccount", provider="customer-1", uid="sub-1")
    request.session.save()
    assert client.get("/accounts/2fa/totp/activate/").status_code == 200
    later = time.time() + 301  # past allauth's re-authentication timeout: sign in again first
    monkeypatch.setattr("accounts.allauth_adapter.time.time", lambda: later)
    assert client.get("/accounts/2fa/totp/activate/").status_code == 403


def test_staff_who_must_enrol_get_no_rental_progress_from_a_poll_without_its_token(olga, settings, make_rental) -> None:  # type: ignore[no-untyped-def]
    # The poll passes the enrolment check for its token's sake; without a token it is an ordinary page.
    settings.MFA_REQUIRED_FOR_STAFF = True
    rental = make_rental()
    client, _ = sign_in("olga")
    response = client.get(f"/rentals/{rental.public_id}/progress/?v=0")
    assert response.status_code == 302 and response["Location"] == "/accounts/2fa/totp/activate/"
