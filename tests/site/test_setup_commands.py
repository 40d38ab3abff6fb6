"""The production set-up commands: a customer with its Lium key, and logins with their roles."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from accounts.models import Customer
from accounts.roles import is_operator, is_staff_reader

KEY = "lium-key-from-the-environment-9f3a"
PASSWORD = "a-long-enough-passphrase-71"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_create_customer_stores_the_key_from_the_environment_and_never_prints_it(monkeypatch) -> None:
    monkeypatch.setenv("LIUM_API_KEY", KEY)
    out = run("create_customer", "Acme Research", "--ref", "acme", "--credential-secret-env", "LIUM_API_KEY")
    credential = Customer.objects.get(customer_ref="acme").default_credential
    assert credential is not None
    assert credential.get_secret() == KEY
    assert KEY not in out and KEY not in credential.secret_encrypted
    assert "…9f3a" in out

    # Run again (a redeploy): the same rows, the new key.
    monkeypatch.setenv("LIUM_API_KEY", KEY + "-2")
    run("create_customer", "Acme Research", "--ref", "acme", "--credential-secret-env", "LIUM_API_KEY")
    assert Customer.objects.count() == 1
    credential = Customer.objects.get().default_credential
    assert credential is not None and credential.get_secret() == KEY + "-2"


@pytest.mark.django_db
def test_create_customer_refuses_an_unset_secret_variable(monkeypatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(CommandError, match="NO_SUCH_KEY is empty or unset"):
        run("create_customer", "Acme", "--ref", "acme", "--credential-secret-env", "NO_SUCH_KEY")
    assert not Customer.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["x" * 250, ""])
def test_create_customer_refuses_a_name_the_column_cannot_hold_and_saves_nothing(monkeypatch, name: str) -> None:
    # With its own --credential-name the customer's name is checked by nothing else (PostgreSQL refused it).
    monkeypatch.setenv("LIUM_API_KEY", KEY)
    args = ["--ref", "acme", "--credential-secret-env", "LIUM_API_KEY", "--credential-name", "Short key"]
    with pytest.raises(CommandError, match="customer name"):
        run("create_customer", name, *args)
    assert not Customer.objects.exists()


@pytest.mark.django_db
def test_create_user_gives_each_role_and_a_working_password(monkeypatch) -> None:
    monkeypatch.setenv("LIUM_API_KEY", KEY)
    monkeypatch.setenv("USER_PASSWORD", PASSWORD)
    run("create_customer", "Acme Research", "--ref", "acme", "--credential-secret-env", "LIUM_API_KEY")
    run("create_user", "alice", "--customer", "acme", "--password-env", "USER_PASSWORD")
    run("create_user", "olga", "--operator", "--password-env", "USER_PASSWORD")
    alice, olga = User.objects.get(username="alice"), User.objects.get(username="olga")
    assert alice.check_password(PASSWORD) and olga.check_password(PASSWORD)
    assert list(alice.memberships.values_list("customer__customer_ref", flat=True)) == ["acme"]
    assert not is_staff_reader(alice)
    assert is_operator(olga)


@pytest.mark.django_db
def test_create_user_refuses_a_weak_password_and_an_unknown_customer(monkeypatch) -> None:
    monkeypatch.setenv("USER_PASSWORD", "123")
    with pytest.raises(CommandError, match="too short"):
        run("create_user", "olga", "--operator", "--password-env", "USER_PASSWORD")
    monkeypatch.setenv("USER_PASSWORD", PASSWORD)
    with pytest.raises(CommandError, match="No customer has the ref 'nobody'"):
        run("create_user", "alice", "--customer", "nobody", "--password-env", "USER_PASSWORD")
    assert not User.objects.exists()
