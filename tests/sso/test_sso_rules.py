"""Single sign-on rules: e-mail domains (validation, uniqueness, routing) and who a sign-in refuses."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from accounts.models import Membership
from sso.domains import domain_clean, domains_clean, sso_config_for_email
from sso.forms import SsoConfigForm
from sso.models import SsoConfig
from sso.services import sso_config_save
from sso.signin import sso_login_refusal, sso_password_refusal

SECRET = "client-secret-never-shown-1234"


def _config(customer, domains=("acme.example",), mandatory=False) -> SsoConfig:  # type: ignore[no-untyped-def]
    return sso_config_save(
        customer=customer,
        issuer_url="https://login.acme.example",
        client_id="dash",
        client_secret=SECRET,
        domains=list(domains),
        mandatory=mandatory,
    )


def _form(customer, existing=None, **data):  # type: ignore[no-untyped-def]
    fields = {
        "issuer_url": "https://login.acme.example/",
        "client_id": "dash",
        "client_secret": SECRET,
        "domains": "acme.example",
        **data,
    }
    return SsoConfigForm(fields, customer_id=customer.pk, existing=existing)


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("acme.example", "acme.example"),
        ("@Acme.Example.", "acme.example"),
        (" labs.acme-research.io ", "labs.acme-research.io"),
    ],
)
def test_a_domain_is_stored_lower_case_without_at(typed: str, stored: str) -> None:
    assert domain_clean(typed) == stored


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("acme", "is not an e-mail domain"),
        ("10.0.0.1", "is not an e-mail domain"),
        ("bob@acme.example", "is not an e-mail domain"),
        ("-acme.example", "is not an e-mail domain"),
        ("gmail.com", "public mail service"),
    ],
)
def test_a_wrong_domain_says_what_to_fix(typed: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        domain_clean(typed)


def test_a_list_of_domains_is_split_on_commas_spaces_and_lines_and_deduplicated() -> None:
    assert domains_clean("acme.example, ACME.example\nlabs.acme.example") == ["acme.example", "labs.acme.example"]
    with pytest.raises(ValidationError) as raised:
        domains_clean("acme.example, nope, gmail.com")
    assert len(raised.value.messages) == 2
    with pytest.raises(ValidationError, match="at least one"):
        domains_clean(" , ")


def test_an_address_is_routed_to_the_provider_of_its_domain(acme, globex) -> None:  # type: ignore[no-untyped-def]
    acme_config = _config(acme, domains=["acme.example", "acme-labs.example"])
    _config(globex, domains=["globex.example"])
    assert sso_config_for_email("Carol@ACME-labs.example") == acme_config
    globex_config = sso_config_for_email("eve@globex.example")
    assert globex_config is not None and globex_config.customer == globex
    assert sso_config_for_email("someone@elsewhere.example") is None
    assert sso_config_for_email("no-at-sign") is None
    # A subdomain is its own domain: it is not routed unless listed.
    assert sso_config_for_email("x@sub.acme.example") is None


def test_the_form_accepts_https_and_local_http_issuers_only(acme) -> None:  # type: ignore[no-untyped-def]
    form = _form(acme)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["issuer_url"] == "https://login.acme.example"
    assert _form(acme, issuer_url="http://127.0.0.1:8345").is_valid()
    for issuer, says in [
        ("http://login.acme.example", "must use https"),
        ("ftp://login.acme.example", "issuer URL"),
        ("login.acme.example", "issuer URL"),
        ("https://login.acme.example/?tenant=1", "no query"),
        ("https://login.acme.example/.well-known/openid-configuration", "without /.well-known"),
    ]:
        form = _form(acme, issuer_url=issuer)
        assert not form.is_valid()
        assert says in str(form.errors["issuer_url"])


def test_the_secret_is_required_once_then_kept_when_left_empty(acme) -> None:  # type: ignore[no-untyped-def]
    form = _form(acme, client_secret="")
    assert not form.is_valid() and "Enter the client secret" in str(form.errors["client_secret"])
    config = _config(acme)
    form = _form(acme, existing=config, client_secret="", client_id="dash-2")
    assert form.is_valid(), form.errors
    sso_config_save(customer=acme, **form.cleaned_data)
    config.refresh_from_db()
    assert config.client_id == "dash-2" and config.get_client_secret() == SECRET
    assert SECRET not in config.client_secret_encrypted
    assert not _form(acme, client_secret=" padded ").is_valid()
    assert not _form(acme, client_id="has space").is_valid()


def test_a_domain_belongs_to_one_customer_only(acme, globex) -> None:  # type: ignore[no-untyped-def]
    _config(globex, domains=["globex.example"])
    form = _form(acme, domains="acme.example, GLOBEX.example")
    assert not form.is_valid()
    assert "globex.example is already claimed by another customer" in str(form.errors["domains"])
    # Saving its own domains again is fine.
    assert _form(globex, domains="globex.example").is_valid()


def test_a_domain_another_customers_members_use_cannot_be_claimed(acme, bob) -> None:  # type: ignore[no-untyped-def]
    bob.email = "bob@globex.example"
    bob.save()
    form = _form(acme, domains="globex.example")
    assert not form.is_valid()
    assert "Members of another customer sign in with @globex.example" in str(form.errors["domains"])


def test_saving_replaces_the_domains(acme) -> None:  # type: ignore[no-untyped-def]
    _config(acme, domains=["acme.example", "old.example"])
    config = _config(acme, domains=["acme.example", "new.example"])
    assert sorted(config.domains.values_list("domain", flat=True)) == ["acme.example", "new.example"]


def _data(email: str, *, nonce: str = "n-1", sub: str = "sub-1") -> dict:
    return {"id_token": {"sub": sub, "nonce": nonce, "email": email}, "userinfo": {"sub": sub, "email": email}}


STATE = {"process": "login", "nonce": "n-1"}


def test_a_sign_in_of_the_customers_domain_goes_on(acme) -> None:  # type: ignore[no-untyped-def]
    config = _config(acme)
    assert sso_login_refusal(config=config, state=STATE, data=_data("new@acme.example"), is_existing=False) is None


def test_a_sign_in_of_another_domain_is_refused(acme) -> None:  # type: ignore[no-untyped-def]
    config = _config(acme)
    reason = sso_login_refusal(config=config, state=STATE, data=_data("eve@globex.example"), is_existing=False)
    assert reason and "signs in people of acme.example only" in reason


def test_a_sign_in_whose_nonce_differs_is_refused(acme) -> None:  # type: ignore[no-untyped-def]
    config = _config(acme)
    for state in ({"process": "login", "nonce": "n-2"}, {"process": "login"}):
        reason = sso_login_refusal(config=config, state=state, data=_data("new@acme.example"), is_existing=False)
        assert reason and "nonce" in reason


def test_an_existing_local_account_is_never_linked_by_e_mail(acme, carol) -> None:  # type: ignore[no-untyped-def]
    carol.email = "carol@acme.example"
    carol.save()
    config = _config(acme)
    reason = sso_login_refusal(config=config, state=STATE, data=_data("Carol@acme.example"), is_existing=False)
    assert reason and "not linked to single sign-on" in reason
    # Once her account is bound to the provider's sub (by an operator), she signs in.
    assert sso_login_refusal(config=config, state=STATE, data=_data("carol@acme.example"), is_existing=True) is None


def test_userinfo_of_another_subject_is_refused(acme) -> None:  # type: ignore[no-untyped-def]
    config = _config(acme)
    data = _data("new@acme.example")
    data["userinfo"]["sub"] = "someone-else"
    assert "another person" in (sso_login_refusal(config=config, state=STATE, data=data, is_existing=False) or "")


def test_mandatory_sso_refuses_passwords_of_the_customers_members_of_its_domains(acme, globex, carol, bob) -> None:  # type: ignore[no-untyped-def]
    carol.email = "carol@acme.example"
    carol.save()
    _config(acme, mandatory=False)
    assert sso_password_refusal(carol) is None
    _config(acme, mandatory=True)
    assert "Acme Research requires single sign-on for @acme.example" in (sso_password_refusal(carol) or "")
    # Someone of that domain who is not Acme's member is not Acme's to lock out.
    Membership.objects.filter(user=carol).delete()
    assert sso_password_refusal(carol) is None
    assert sso_password_refusal(bob) is None  # bob@example.com: no provider
