"""The upstream credential's secret is shown nowhere after saving, except its last 4 characters."""

from __future__ import annotations

import pytest

from accounts.models import UpstreamCredential
from tests.conftest import SIM_KEY

pytestmark = pytest.mark.django_db


def test_the_admin_shows_only_the_last_four_characters(credential, admin_client) -> None:
    changelist = admin_client.get("/admin/accounts/upstreamcredential/").content.decode()
    change = admin_client.get(f"/admin/accounts/upstreamcredential/{credential.pk}/change/").content.decode()
    assert f"…{SIM_KEY[-4:]}" in changelist
    assert SIM_KEY not in changelist and SIM_KEY not in change


def test_the_secret_is_encrypted_at_rest(credential) -> None:
    stored = UpstreamCredential.objects.values_list("secret_encrypted", flat=True).get()
    assert SIM_KEY not in stored
    assert UpstreamCredential.objects.get().get_secret() == SIM_KEY


def test_saving_without_a_new_secret_keeps_the_old_one(credential, admin_client) -> None:
    admin_client.post(
        f"/admin/accounts/upstreamcredential/{credential.pk}/change/",
        {
            "name": "main",
            "scheme": "api_key",
            "base_url": credential.base_url,
            "customer_ref": "",
            "active": "on",
            "secret": "",
        },
    )
    assert UpstreamCredential.objects.get().get_secret() == SIM_KEY


def test_the_client_never_shows_the_secret_in_its_repr(credential) -> None:
    from rentals.upstream import client_for

    client = client_for(credential)
    assert SIM_KEY not in repr(client) and SIM_KEY not in repr(client.auth)


def test_test_connection_reports_the_account_and_idempotency(simulator, credential, admin_client) -> None:
    response = admin_client.post(
        "/admin/accounts/upstreamcredential/",
        {"action": "test_connection", "_selected_action": [credential.pk]},
        follow=True,
    )
    html = response.content.decode()
    assert "connected to" in html and "balance $5000" in html
    assert "retries are safe (rent_idempotency)" in html


def test_test_connection_says_when_the_key_is_wrong(simulator, credential, admin_client) -> None:
    credential.set_secret("wrong-key")
    credential.save()
    html = admin_client.post(
        "/admin/accounts/upstreamcredential/",
        {"action": "test_connection", "_selected_action": [credential.pk]},
        follow=True,
    ).content.decode()
    assert "Invalid API key or token" in html and "connected to" not in html
