"""Accounts in a real browser (django-allauth): TOTP enrolment and sign-in with a code and with a recovery code,
two-factor required by a customer admin at the next sign-in, a password reset through the mailbox, and "sign out
everywhere else". Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from billing.models import CustomerAdmin
from tests.browser.conftest import PASSWORD, totp_code_once

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]


def sign_in(page: Page, username: str, password: str = PASSWORD) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def enrol_totp(page: Page, shot: Shot) -> str:
    """On the enrolment page: read the secret, answer with a code; return the secret."""
    expect(page.get_by_role("heading", name="Activate Authenticator App")).to_be_visible()
    secret = page.locator("#authenticator_secret").input_value()
    shot(page, "totp-activate")
    page.locator("input[name=code]").fill(totp_code_once(secret))
    page.get_by_role("button", name="Activate").click()
    return secret


def test_totp_enrolment_then_sign_in_with_a_code_and_with_a_recovery_code(
    page: Page, browser: Browser, live_server, alice, shot: Shot
) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, "alice")
    page.wait_for_url("**/fabrics/")
    page.goto("/accounts/2fa/totp/activate/")
    # Adding an authenticator asks for the password again (allauth's re-authentication).
    page.locator("input[name=password]").fill(PASSWORD)
    page.get_by_role("button", name="Confirm").click()
    secret = enrol_totp(page, shot)
    expect(page.get_by_role("status").first).to_contain_text("activated")
    page.goto("/accounts/2fa/recovery-codes/")
    codes = page.locator("main textarea").input_value().split()
    assert len(codes) >= 5, "recovery codes are shown"
    shot(page, "recovery-codes")

    other = browser.new_context(base_url=live_server.url).new_page()
    sign_in(other, "alice")
    other.wait_for_url("**/2fa/authenticate/")
    other.locator("input[name=code]").fill("000000")
    other.get_by_role("button", name="Sign In").click()
    expect(other.locator("main")).to_contain_text("Incorrect code")
    other.locator("input[name=code]").fill(totp_code_once(secret))
    other.get_by_role("button", name="Sign In").click()
    other.wait_for_url("**/fabrics/")

    third = browser.new_context(base_url=live_server.url).new_page()
    sign_in(third, "alice")
    third.wait_for_url("**/2fa/authenticate/")
    third.locator("input[name=code]").fill(codes[0])
    third.get_by_role("button", name="Sign In").click()
    third.wait_for_url("**/fabrics/")
    shot(third, "signed-in-with-a-recovery-code")


def test_two_factor_required_by_a_customer_admin_is_enforced_at_the_next_sign_in(
    page: Page, browser: Browser, live_server, alice, carol, shot: Shot
) -> None:  # type: ignore[no-untyped-def]
    CustomerAdmin.objects.create(membership=alice.memberships.get())
    acme = alice.memberships.get().customer
    sign_in(page, "alice")
    page.wait_for_url("**/fabrics/")
    page.goto(f"/customers/{acme.pk}/team/")
    page.get_by_role("button", name="Require two-factor for every member").click()
    expect(page.get_by_test_id("two-factor")).to_contain_text("Required")
    shot(page, "team-requires-two-factor")

    carols = browser.new_context(base_url=live_server.url).new_page()
    sign_in(carols, "carol")
    carols.wait_for_url("**/2fa/totp/activate/")
    carols.goto("/rentals/")
    carols.wait_for_url("**/2fa/totp/activate/")
    expect(carols.locator("main")).to_contain_text("requires two-factor")
    enrol_totp(carols, shot)
    carols.goto("/rentals/")
    expect(carols).to_have_url(re.compile(r"/rentals/$"))
    page.goto(f"/customers/{acme.pk}/team/")
    expect(page.locator("tr[data-member=carol]")).to_contain_text("on")


def test_a_password_reset_from_the_mailbox_signs_the_user_back_in(page: Page, alice, mailoutbox, shot: Shot) -> None:  # type: ignore[no-untyped-def]
    page.goto("/accounts/login/")
    page.get_by_role("link", name="Forgot your password?").click()
    page.locator("input[name=email]").fill("alice@example.com")
    page.get_by_role("button", name="Reset My Password").click()
    expect(page.locator("main")).to_contain_text("sent you an email")
    link = re.search(r"https?://\S+/password/reset/key/\S+", mailoutbox[-1].body).group(0)  # type: ignore[union-attr]
    page.goto(link)
    page.locator("input[name=password1]").fill("a-brand-new-passphrase-5")
    page.locator("input[name=password2]").fill("a-brand-new-passphrase-5")
    shot(page, "new-password")
    page.get_by_role("button", name="Change Password").click()
    expect(page.locator("main")).to_contain_text("password is now changed")
    sign_in(page, "alice", "a-brand-new-passphrase-5")
    page.wait_for_url("**/fabrics/")


def test_sign_out_everywhere_else_ends_the_other_session(
    page: Page, browser: Browser, live_server, alice, shot: Shot
) -> None:  # type: ignore[no-untyped-def]
    phone = browser.new_context(base_url=live_server.url).new_page()
    sign_in(phone, "alice")
    phone.wait_for_url("**/fabrics/")
    sign_in(page, "alice")
    page.wait_for_url("**/fabrics/")
    page.get_by_role("link", name="alice").click()
    page.get_by_role("link", name="Sessions").click()
    shot(page, "sessions")
    page.get_by_role("button", name="Sign Out Other Sessions").click()
    phone.goto("/rentals/")
    phone.wait_for_url("**/accounts/login/**")
    page.goto("/rentals/")
    expect(page).to_have_url(re.compile(r"/rentals/$"))
