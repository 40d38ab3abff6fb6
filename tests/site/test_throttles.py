"""The login throttle sees the real client address behind a proxy and locks one username at one address only."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.1"  # every request reaches the app from the reverse proxy


def login_from(address: str, username: str, password: str) -> int:
    """Post the login form as if from `address` through one proxy; return the status (302 means logged in)."""
    client = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=address)
    return client.post("/accounts/login/", {"login": username, "password": password}).status_code


def test_wrong_passwords_from_one_address_do_not_lock_the_user_out_elsewhere(alice, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 1
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login_from("198.51.100.2", "alice", "wrong")
    assert login_from("198.51.100.2", "alice", "pw") == 429, "the guessing address is locked out"
    assert login_from("203.0.113.3", "alice", "pw") == 302, "alice logs in from her own address"


def test_a_forged_forwarded_for_entry_does_not_escape_the_lock(alice, settings) -> None:  # type: ignore[no-untyped-def]
    # The proxy appends the address it saw; anything to its left is whatever the client sent.
    settings.TRUSTED_PROXY_COUNT = 1
    for n in range(settings.AXES_FAILURE_LIMIT):
        login_from(f"192.0.2.{n + 1}, 198.51.100.2", "alice", "wrong")
    assert login_from("192.0.2.99, 198.51.100.2", "alice", "pw") == 429


def test_without_a_trusted_proxy_the_forwarded_header_is_ignored(alice, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 0
    for n in range(settings.AXES_FAILURE_LIMIT):
        login_from(f"192.0.2.{n + 1}", "alice", "wrong")
    assert login_from("203.0.113.3", "alice", "pw") == 429, "all came from the same peer address"


def test_a_username_longer_than_any_account_is_a_wrong_login_not_a_500() -> None:
    # The login form does not enforce the username's length; the throttle records every failed name,
    # in a column of 255 characters that PostgreSQL enforces.
    response = Client().post("/accounts/login/", {"login": "9" * 5000, "password": "x"})
    assert response.status_code == 200
    assert "are not correct" in response.content.decode()


def test_the_admin_has_no_login_form_of_its_own() -> None:
    # A second password form would bypass two-factor: the admin sends people to the dashboard's sign-in.
    response = Client().post("/admin/login/?next=/admin/", {"username": "admin", "password": "x"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/admin/")


def test_an_e_mail_address_shares_its_accounts_lock(alice, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 1
    alice.email = "alice@acme.test"
    alice.save()
    for n in range(settings.AXES_FAILURE_LIMIT):
        login_from("198.51.100.2", "alice" if n % 2 else "Alice@acme.test", "wrong")
    assert login_from("198.51.100.2", "alice@acme.test", "pw") == 429
    assert login_from("203.0.113.3", "alice@acme.test", "pw") == 302, "by e-mail from her own address"


def test_a_username_in_other_letter_cases_shares_its_accounts_lock(alice, settings) -> None:  # type: ignore[no-untyped-def]
    # allauth signs "ALICE" in as alice (usernames match case-insensitively): each casing is the same account, so
    # each must not be a fresh budget of AXES_FAILURE_LIMIT guesses (alice has 32 of them).
    settings.TRUSTED_PROXY_COUNT = 1
    for login in ["Alice", "ALICE", "aLice", "alIce", "aliCe"][: settings.AXES_FAILURE_LIMIT]:
        login_from("198.51.100.2", login, "wrong")
    assert login_from("198.51.100.2", "alicE", "pw") == 429
    assert login_from("203.0.113.3", "ALICE", "pw") == 302, "from her own address, in any case"


def test_guessing_with_one_very_long_username_is_still_locked_out(settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 1
    answers = [login_from("198.51.100.2", "x" * 300, "wrong") for _ in range(settings.AXES_FAILURE_LIMIT + 1)]
    assert answers[0] == 200, "a wrong login"
    assert answers[-1] == 429, "the guessing is locked out"


def test_one_address_guessing_a_password_for_every_user_is_locked_out_at_the_address_limit(alice, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 1
    limit = settings.LOGIN_ADDRESS_FAILURE_LIMIT
    assert limit > settings.AXES_FAILURE_LIMIT, "the address limit is the higher one"
    answers = [login_from("198.51.100.7", f"user{n}", "wrong") for n in range(limit)]
    assert set(answers[:-1]) == {200}, "each username was tried once: no username+address lock"
    assert answers[-1] == 429, "the failure that reaches the address's limit locks it"
    client = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7")
    response = client.post("/accounts/login/", {"login": "alice", "password": "pw"})
    assert response.status_code == 429, "the guessing address is locked out for every username"
    assert "from your address" in response.content.decode()
    assert login_from("203.0.113.3", "alice", "pw") == 302, "alice logs in from her own address"


def test_a_login_that_succeeds_does_not_clear_the_addresss_other_failures(alice, carol, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 1
    limit = settings.LOGIN_ADDRESS_FAILURE_LIMIT
    for n in range(limit - 1):
        login_from("198.51.100.7", f"user{n}", "wrong")
    assert login_from("198.51.100.7", "carol", "pw") == 302, "below the limit a right password logs in"
    login_from("198.51.100.7", "someone", "wrong")
    assert login_from("198.51.100.7", "alice", "pw") == 429


def test_ipv6_addresses_of_one_64_prefix_share_one_lock(alice, settings) -> None:  # type: ignore[no-untyped-def]
    # Anyone given a /64 can use any of its 2^64 addresses: the lock is the prefix's.
    settings.TRUSTED_PROXY_COUNT = 1
    for n in range(settings.AXES_FAILURE_LIMIT):
        login_from(f"2001:db8:1:2::{n % 2 + 1:x}", "alice", "wrong")
    assert login_from("2001:db8:1:2:ffff::9", "alice", "pw") == 429, "another address of the same /64"
    assert login_from("2001:db8:1:3::1", "alice", "pw") == 302, "the next /64 is someone else"


def test_the_address_lock_counts_a_64_prefix_as_one_address(alice, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRUSTED_PROXY_COUNT = 1
    limit = settings.LOGIN_ADDRESS_FAILURE_LIMIT
    answers = [login_from(f"2001:db8:1:2::{n % 2 + 1:x}", f"user{n}", "wrong") for n in range(limit)]
    assert answers[-1] == 429
    assert login_from("2001:db8:1:2:abcd::1", "alice", "pw") == 429
