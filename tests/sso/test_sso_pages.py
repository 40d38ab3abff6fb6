"""Single sign-on pages: the settings page (who may use it, the secret never shown), "sign in with your company"
(domain routing to the provider with PKCE, state and nonce) and the sign-in form under mandatory SSO."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

import pytest
from allauth.socialaccount.models import SocialApp
from django.db.models import F, Value
from django.db.models.functions import Concat

from accounts.models import AccountChange
from billing.models import CustomerAdmin
from sso.models import SsoConfig
from sso.oidc.adapter import CustomerOidcAdapter
from sso.services import sso_config_save

SECRET = "s3cret-value-that-must-never-show"
FORM = {
    "issuer_url": "https://login.acme.example",
    "client_id": "dash",
    "client_secret": SECRET,
    "domains": "acme.example",
}


@pytest.fixture
def acme_admin(alice):  # type: ignore[no-untyped-def]
    CustomerAdmin.objects.create(membership=alice.memberships.get())
    return alice


def _configure(customer, *, mandatory: bool = False) -> SsoConfig:  # type: ignore[no-untyped-def]
    return sso_config_save(
        customer=customer,
        issuer_url="https://login.acme.example",
        client_id="dash",
        client_secret=SECRET,
        domains=["acme.example"],
        mandatory=mandatory,
    )


def test_a_customer_admin_saves_sso_and_the_secret_never_shows(acme, acme_admin, client_for, caplog) -> None:  # type: ignore[no-untyped-def]
    client = client_for(acme_admin)
    assert b'data-testid="sso-link"' in client.get(f"/customers/{acme.pk}/team/").content
    with caplog.at_level(logging.DEBUG):
        response = client.post(f"/customers/{acme.pk}/sso/", {**FORM, "mandatory": "on"})
    assert response.status_code == 302
    config = SsoConfig.objects.get(customer=acme)
    assert config.mandatory and config.get_client_secret() == SECRET
    assert SECRET not in config.client_secret_encrypted
    page = client.get(f"/customers/{acme.pk}/sso/").content.decode()
    assert "https://login.acme.example" in page and SECRET not in page
    assert f"/accounts/sso/customer-{acme.pk}/login/callback/" in page
    assert not any(SECRET in record.getMessage() for record in caplog.records)
    # No allauth app row holds the secret: the app is built in memory from the encrypted column.
    assert not SocialApp.objects.exists()


def test_a_wrong_field_says_what_to_fix_and_keeps_nothing(acme, acme_admin, client_for) -> None:  # type: ignore[no-untyped-def]
    response = client_for(acme_admin).post(
        f"/customers/{acme.pk}/sso/", {**FORM, "domains": "gmail.com", "issuer_url": "http://login.acme.example"}
    )
    assert response.status_code == 200
    assert b"public mail service" in response.content and b"must use https" in response.content
    assert SECRET.encode() not in response.content  # the typed secret is not rendered back either
    assert not SsoConfig.objects.exists()


def test_a_plain_member_cannot_change_sso_and_an_operator_can(acme, carol, olga, client_for) -> None:  # type: ignore[no-untyped-def]
    assert b'data-testid="sso-link"' not in client_for(carol).get(f"/customers/{acme.pk}/team/").content
    assert client_for(carol).post(f"/customers/{acme.pk}/sso/", FORM).status_code == 403
    assert client_for(olga).post(f"/customers/{acme.pk}/sso/", FORM).status_code == 302
    assert client_for(olga).post(f"/customers/{acme.pk}/sso/remove/").status_code == 302
    assert not SsoConfig.objects.exists()


def test_saving_and_removing_sso_is_on_the_audit_trail_without_the_secret(acme, olga, client_for) -> None:  # type: ignore[no-untyped-def]
    client = client_for(olga)
    client.post(f"/customers/{acme.pk}/sso/", {**FORM, "mandatory": "on"})
    client.post(f"/customers/{acme.pk}/sso/remove/")
    saved, removed = AccountChange.objects.order_by("pk")
    assert saved.actor == olga and "single sign-on of Acme" in saved.what and "acme.example" in saved.what
    assert "mandatory" in saved.what and SECRET not in saved.what
    assert removed.actor == olga and "removed single sign-on of Acme" in removed.what
    audit = client.get("/ops/audit/").content.decode()
    assert "single sign-on of Acme" in audit


def test_sign_in_with_your_company_goes_to_the_domains_provider_with_pkce_state_and_nonce(
    acme, client, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    _configure(acme)
    discovery = {
        "authorization_endpoint": "https://login.acme.example/auth",
        "token_endpoint": "https://login.acme.example/token",
        "jwks_uri": "https://login.acme.example/jwks",
    }
    monkeypatch.setattr(CustomerOidcAdapter, "openid_config", discovery)
    response = client.post("/accounts/sso/", {"email": "Newbie@ACME.example", "next": "https://evil.example/"})
    assert response.status_code == 200
    url = response.context["url"]
    parts = urlsplit(url)
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == "https://login.acme.example/auth"
    assert query["client_id"] == "dash" and query["response_type"] == "code"
    assert query["redirect_uri"].endswith(f"/accounts/sso/customer-{acme.pk}/login/callback/")
    assert query["code_challenge_method"] == "S256" and query["code_challenge"]
    assert query["state"] and len(query["nonce"]) >= 32
    assert set(query["scope"].split()) == {"openid", "email", "profile"}
    assert SECRET not in response.content.decode()
    # The foreign `next` is dropped, never stashed for after the sign-in.
    assert "evil.example" not in str(client.session.items())


def test_an_address_without_sso_is_sent_back_to_the_password(acme, client) -> None:  # type: ignore[no-untyped-def]
    _configure(acme)
    response = client.post("/accounts/sso/", {"email": "bob@globex.example"})
    assert response.status_code == 400
    assert b"No single sign-on is set up for @globex.example" in response.content
    assert client.post("/accounts/sso/", {"email": "not an address"}).status_code == 400


def test_mandatory_sso_refuses_the_password_of_the_customers_people(acme, alice, bob, client) -> None:  # type: ignore[no-untyped-def]
    alice.email = "alice@acme.example"
    alice.save()
    _configure(acme, mandatory=True)
    for login in ("alice", "ALICE@acme.example"):
        response = client.post("/accounts/login/", {"login": login, "password": "pw"})
        assert response.status_code == 200
        assert b"Acme Research requires single sign-on for @acme.example" in response.content
        assert b"Sign in with your company" in response.content
    assert "_auth_user_id" not in client.session
    assert client.post("/accounts/login/", {"login": "bob", "password": "pw"}).status_code == 302


def test_an_unreachable_provider_is_said_not_a_500(acme, client) -> None:  # type: ignore[no-untyped-def]
    SsoConfig.objects.filter(pk=_configure(acme).pk).update(issuer_url="http://127.0.0.1:1")
    response = client.post("/accounts/sso/", {"email": "newbie@acme.example"})
    assert response.status_code == 400
    assert b"Acme Research&#x27;s sign-in provider cannot be reached right now" in response.content


def test_a_discovery_document_without_endpoints_is_refused(acme, client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter

    _configure(acme)
    monkeypatch.setattr(OpenIDConnectOAuth2Adapter, "openid_config", {"issuer": "https://login.acme.example"})
    response = client.post("/accounts/sso/", {"email": "newbie@acme.example"})
    assert response.status_code == 400 and b"cannot be reached" in response.content


def test_allauths_own_login_url_with_an_unreachable_provider_shows_the_failure_page(acme, client) -> None:  # type: ignore[no-untyped-def]
    SsoConfig.objects.filter(pk=_configure(acme).pk).update(issuer_url="http://127.0.0.1:1")
    response = client.post(f"/accounts/sso/customer-{acme.pk}/login/")
    assert response.status_code == 401  # allauth's "third-party login failure", not a 500


def test_an_id_token_without_a_key_id_is_refused_not_a_500(acme, rf, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import jwt
    from allauth.socialaccount.providers.oauth2.client import OAuth2Error

    from sso.adapter import sso_app

    app = sso_app(_configure(acme))
    monkeypatch.setattr(CustomerOidcAdapter, "openid_config", {"jwks_uri": "http://127.0.0.1:1/jwks"})
    adapter = CustomerOidcAdapter(rf.get("/"), app.provider_id)
    with pytest.raises(OAuth2Error):
        adapter._decode_id_token(
            app, jwt.encode({"sub": "x"}, "not-the-providers-key-but-long-enough-for-hs256", algorithm="HS256")
        )


def test_in_production_a_provider_on_a_private_address_is_refused(acme, acme_admin, client_for, settings) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    client = client_for(acme_admin)
    response = client.post(f"/customers/{acme.pk}/sso/", {**FORM, "issuer_url": "https://10.0.0.7"})
    assert response.status_code == 200 and b"private, loopback" in response.content
    assert b"a provider must be on a public address" in response.content
    # A configuration made before (or a discovery document naming an inner address) is refused at each request.
    SsoConfig.objects.filter(pk=_configure(acme).pk).update(issuer_url="http://127.0.0.1:1")
    client.logout()
    response = client.post("/accounts/sso/", {"email": "newbie@acme.example"})
    assert response.status_code == 400 and b"cannot be reached right now" in response.content


def test_every_request_to_a_provider_is_address_checked_in_production(settings) -> None:  # type: ignore[no-untyped-def]
    import requests
    from allauth.socialaccount.adapter import get_adapter

    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    session = get_adapter().get_requests_session()
    with pytest.raises(requests.exceptions.InvalidURL, match="private, loopback"):
        session.get("http://127.0.0.1:8345/.well-known/openid-configuration")


def test_under_mandatory_sso_a_member_keeps_their_e_mail_in_the_customers_domains(acme, alice, client_for) -> None:  # type: ignore[no-untyped-def]
    # Otherwise a new address elsewhere would be a way back to password sign-in, around the customer's provider.
    from allauth.account.models import EmailAddress

    EmailAddress.objects.filter(user=alice).update(email="alice@acme.example")
    alice.email = "alice@acme.example"
    alice.save()
    _configure(acme, mandatory=True)
    client = client_for(alice)
    response = client.post("/accounts/email/", {"email": "alice@elsewhere.example", "action_add": ""})
    assert response.status_code == 200
    assert b"Acme Research requires single sign-on for @acme.example" in response.content
    assert not EmailAddress.objects.filter(email="alice@elsewhere.example").exists()
    SsoConfig.objects.filter(customer=acme).update(mandatory=False)
    assert client.post("/accounts/email/", {"email": "alice@elsewhere.example", "action_add": ""}).status_code == 302


def test_sso_cannot_be_made_mandatory_while_members_of_its_domains_are_not_linked_to_it(
    acme, acme_admin, carol, client_for
) -> None:  # type: ignore[no-untyped-def]
    # They could sign in neither with their password (refused) nor through the provider (not linked): locked out,
    # the admin saving it among them.
    from allauth.socialaccount.models import SocialAccount
    from django.contrib.auth.models import User

    User.objects.filter(pk__in=[acme_admin.pk, carol.pk]).update(email=Concat(F("username"), Value("@acme.example")))
    client = client_for(acme_admin)
    response = client.post(f"/customers/{acme.pk}/sso/", {**FORM, "mandatory": "on"})
    assert response.status_code == 200
    assert b"alice, carol" in response.content and b"not linked" in response.content
    assert not SsoConfig.objects.exists()
    assert client.post(f"/customers/{acme.pk}/sso/", FORM).status_code == 302, "optional SSO is saved"
    for n, user in enumerate([acme_admin, carol]):
        SocialAccount.objects.create(user=user, provider=f"customer-{acme.pk}", uid=f"sub-{n}")
    assert client.post(f"/customers/{acme.pk}/sso/", {**FORM, "mandatory": "on"}).status_code == 302
    assert SsoConfig.objects.get(customer=acme).mandatory
