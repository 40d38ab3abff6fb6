"""Upgrading to django-allauth (accounts 0005) keeps every user, password and membership, and gives each user's
e-mail to allauth so they can sign in and reset a password by it."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import make_password
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

BEFORE = [("accounts", "0004_customer_verify_fabric_default"), ("account", "0009_emailaddress_unique_primary_email")]
AFTER = [("accounts", "0005_customer_require_two_factor_accountchange")]


@pytest.mark.django_db(transaction=True)
def test_upgrading_keeps_users_passwords_and_memberships() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    User, Customer, Membership = (
        old.get_model(*name) for name in [("auth", "User"), ("accounts", "Customer"), ("accounts", "Membership")]
    )
    acme = Customer.objects.create(name="Acme Research")
    alice = User.objects.create(username="alice", email="Alice@Example.com", password=make_password("pw"))
    shared = User.objects.create(username="twin", email="alice@example.com", password=make_password("pw"))
    nomail = User.objects.create(username="nomail", password=make_password("pw"))
    Membership.objects.create(user=alice, customer=acme)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    User, Membership, EmailAddress = (
        new.get_model(*name) for name in [("auth", "User"), ("accounts", "Membership"), ("account", "EmailAddress")]
    )
    assert set(User.objects.values_list("username", flat=True)) == {"alice", "twin", "nomail"}
    assert Membership.objects.filter(user__username="alice", customer__name="Acme Research").exists()
    address = EmailAddress.objects.get(user_id=alice.pk)
    assert (address.email, address.primary, address.verified) == ("alice@example.com", True, True)
    assert not EmailAddress.objects.filter(user_id__in=[shared.pk, nomail.pk]).exists(), "one account per address"

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # the rest of the project, as `migrate` does
    client = Client()
    assert client.post("/accounts/login/", {"login": "alice", "password": "pw"}).status_code == 302
    assert Client().post("/accounts/login/", {"login": "alice@example.com", "password": "pw"}).status_code == 302
    assert client.get("/rentals/").status_code == 200
