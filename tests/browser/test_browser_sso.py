"""Single sign-on in a real browser against a real OpenID provider (tests/oidc: panva's certified oidc-provider).

Chromium goes from "Sign in with your company" to the provider's own sign-in page and back: authorization code
flow with PKCE (the provider requires it), state and nonce, the ID token's signature checked against the
provider's JWKS. Each test leaves screenshots in test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from tests.conftest import free_port
from tests.oidc.provider import OidcProvider, oidc_provider_start

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]
IDP_USERS = ["newbie@acme.example", "eve@globex.example", "carol@acme.example", "alice@acme.example"]


@pytest.fixture
def idp(live_server, acme, browser_problems) -> Iterator[OidcProvider]:  # type: ignore[no-untyped-def]
    """Acme's provider, running, and Acme's SSO configured for acme.example through it."""
    from sso.services import sso_config_save

    # The provider's development pages ask for a web font (no network here) and a favicon neither side has.
    browser_problems.allow(r"fonts\.googleapis\.com|/favicon\.ico")

    port = free_port()
    callback = f"{live_server.url}/accounts/sso/customer-{acme.pk}/login/callback/"
    provider = oidc_provider_start(port=port, redirect_uris=[callback], users=IDP_USERS)
    sso_config_save(
        customer=acme,
        issuer_url=provider.issuer,
        client_id=provider.client_id,
        client_secret=provider.client_secret,
        domains=["acme.example"],
        mandatory=False,
    )
    yield provider
    provider.stop()


def sso_sign_in(page: Page, *, typed: str, at_provider: str) -> None:
    """Start "Sign in with your company" with `typed`, then sign in at the provider as `at_provider`."""
    page.goto("/accounts/sso/")
    page.get_by_label("Work e-mail").fill(typed)
    page.get_by_role("button", name="Continue").click()
    # The provider's own (development) sign-in form: the e-mail as login, any password.
    page.locator("input[name=login]").fill(at_provider)
    page.locator("input[name=password]").fill("anything")
    page.get_by_role("button", name="Sign-in").click()


def test_a_new_person_of_the_domain_signs_in_and_lands_as_a_member_of_that_customer_only(
    idp: OidcProvider, acme, globex, page: Page, shot: Shot
) -> None:
    from allauth.account.models import EmailAddress
    from allauth.socialaccount.models import SocialAccount

    from accounts.models import Membership
    from billing.models import CustomerAdmin

    sso_sign_in(page, typed="newbie@acme.example", at_provider="newbie@acme.example")
    page.wait_for_url("**/fabrics/")
    shot(page, "signed-in")
    user = User.objects.get(email="newbie@acme.example")
    assert user.username == "newbie"
    # The provider said the address is verified; allauth keeps it as the account's one address.
    assert list(EmailAddress.objects.filter(user=user).values_list("email", "verified", "primary")) == [
        ("newbie@acme.example", True, True)
    ]
    assert list(Membership.objects.filter(user=user).values_list("customer__name", flat=True)) == ["Acme Research"]
    assert not CustomerAdmin.objects.filter(membership__user=user).exists()
    assert not user.has_usable_password()
    # The provider's `sub` binds the account, under Acme's provider only.
    account = SocialAccount.objects.get(user=user)
    assert account.provider == f"customer-{acme.pk}" and account.uid.startswith("sub-")

    # Signing in again finds the same account through the sub.
    page.context.clear_cookies()
    sso_sign_in(page, typed="newbie@acme.example", at_provider="newbie@acme.example")
    page.wait_for_url("**/fabrics/")
    assert User.objects.filter(email="newbie@acme.example").count() == 1
    page.goto(f"/customers/{acme.pk}/team/")
    expect(page.locator("[data-member]").filter(has_text=user.username)).to_contain_text("member")
    assert page.request.get(f"/customers/{globex.pk}/team/").status == 404


def test_a_person_of_another_domain_is_refused(idp: OidcProvider, browser_problems, page: Page, shot: Shot) -> None:  # type: ignore[no-untyped-def]
    browser_problems.allow("status of 403")  # the refusal page answers 403
    sso_sign_in(page, typed="newbie@acme.example", at_provider="eve@globex.example")
    expect(page.get_by_test_id("sso-refused")).to_contain_text("signs in people of acme.example only")
    shot(page, "refused")
    assert not User.objects.filter(email="eve@globex.example").exists()


def test_an_existing_account_with_the_same_e_mail_is_not_linked(
    idp: OidcProvider, carol, browser_problems, page: Page
) -> None:  # type: ignore[no-untyped-def]
    from allauth.socialaccount.models import SocialAccount

    browser_problems.allow("status of 403")  # the refusal page answers 403

    User.objects.filter(pk=carol.pk).update(email="carol@acme.example")
    sso_sign_in(page, typed="carol@acme.example", at_provider="carol@acme.example")
    expect(page.get_by_test_id("sso-refused")).to_contain_text("not linked to single sign-on")
    assert not SocialAccount.objects.exists()
    assert User.objects.filter(email__iexact="carol@acme.example").count() == 1


def test_a_tampered_id_token_is_refused(idp: OidcProvider, browser_problems, page: Page, shot: Shot) -> None:  # type: ignore[no-untyped-def]
    browser_problems.allow("status of 401")  # allauth's sign-in failure page answers 401
    idp.tamper_next_id_token()
    sso_sign_in(page, typed="newbie@acme.example", at_provider="newbie@acme.example")
    expect(page.get_by_role("heading", name="Third-Party Login Failure")).to_be_visible()
    shot(page, "tampered")
    assert not User.objects.filter(email__endswith="@acme.example").exists()


def test_mandatory_sso_refuses_the_password_and_points_to_sso(
    idp: OidcProvider, acme, alice, bob, page: Page, shot: Shot
) -> None:
    from sso.models import SsoConfig

    User.objects.filter(pk=alice.pk).update(email="alice@acme.example")
    SsoConfig.objects.filter(customer=acme).update(mandatory=True)
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("Acme Research requires single sign-on for @acme.example")
    shot(page, "password-refused")
    expect(page.get_by_role("link", name="Sign in with your company")).to_be_visible()
    # Someone of another domain still signs in with a password.
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/fabrics/")


def test_a_person_with_an_authenticator_app_signs_in_through_sso_with_a_code(
    idp: OidcProvider, acme, page: Page, shot: Shot
) -> None:
    # allauth keeps the sign-in in the session while it asks for the code, and reads the provider back from it: the
    # customer's provider (built from SsoConfig, no SocialApp row) must be found again there, not a 500.
    import time

    from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, generate_totp_secret, hotp_value

    sso_sign_in(page, typed="newbie@acme.example", at_provider="newbie@acme.example")
    page.wait_for_url("**/fabrics/")
    secret = generate_totp_secret()
    TOTP.activate(User.objects.get(email="newbie@acme.example"), secret)
    page.context.clear_cookies()
    sso_sign_in(page, typed="newbie@acme.example", at_provider="newbie@acme.example")
    page.wait_for_url("**/2fa/authenticate/")
    expect(page.locator("input[name=code]")).to_be_visible()
    shot(page, "code-asked")
    page.locator("input[name=code]").fill(format_hotp_value(hotp_value(secret, int(time.time()) // 30)))
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url("**/fabrics/")
