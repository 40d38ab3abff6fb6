"""Rotating FIELD_ENCRYPTION_KEYS as the README says re-encrypts every secret at rest, and a check names what
does not decrypt (model, pk, field; never the value) in a management command and in /readyz."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import httpx
import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import models
from django.test import Client
from standardwebhooks.webhooks import Webhook

from accounts.crypto import ENCRYPTED_FIELDS
from accounts.models import UpstreamCredential
from dashboard import health
from notifications.models import WebhookEndpoint
from notifications.services import endpoint_create
from rentals import upstream
from tests.notifications.conftest import deliver_all

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_probe() -> Iterator[None]:
    """/readyz remembers its secrets answer for a few seconds: no test sees another's."""
    health.secrets_check.forget()
    yield
    health.secrets_check.forget()


OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def lium_sees(credential: UpstreamCredential) -> str:
    """Return the X-API-Key the upstream client sends for this credential."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("X-API-Key", ""))
        return httpx.Response(200, json={"id": "acct", "email": "x@y", "name": "x", "balance": 1.0})

    credential.refresh_from_db()
    upstream.client_for(credential, http=httpx.Client(transport=httpx.MockTransport(handle))).me()
    return seen[0]


def check_secrets() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("check_secrets", stdout=out, stderr=out)
    except (CommandError, SystemExit) as exc:
        return 1, out.getvalue() + str(exc)
    return 0, out.getvalue()


def test_the_readme_rotation_keeps_webhooks_and_credentials_working_and_retires_the_old_key(
    settings, credential, alice, receiver, make_rental, move_rental
) -> None:
    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    credential.set_secret("lium-key-1234")
    credential.save()
    _endpoint, whsec = endpoint_create(
        customer=alice.memberships.get().customer, url=receiver.url, events=["*"], created_by=alice
    )

    settings.FIELD_ENCRYPTION_KEYS = [NEW, OLD]  # the new key first, the old ones after it; restart
    call_command("rotate_credentials", stdout=StringIO())  # the README's command name keeps working
    settings.FIELD_ENCRYPTION_KEYS = [NEW]  # drop the old key; restart

    assert check_secrets()[0] == 0
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["delivered"]
    Webhook(whsec).verify(receiver.requests[0].body, receiver.requests[0].headers)
    assert lium_sees(credential) == "lium-key-1234"

    settings.FIELD_ENCRYPTION_KEYS = [OLD]  # a leaked old key alone opens nothing any more
    status, report = check_secrets()
    assert status == 1
    assert f"notifications.WebhookEndpoint pk={_endpoint.pk} secret_encrypted" in report
    assert f"accounts.UpstreamCredential pk={credential.pk} secret_encrypted" in report
    assert whsec not in report and "lium-key-1234" not in report


def test_every_encrypted_column_is_in_the_one_registry() -> None:
    from django.apps import apps

    found = {
        (model._meta.label, field.name)
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if isinstance(field, models.Field) and field.name.endswith("_encrypted")
    }
    assert found == set(ENCRYPTED_FIELDS)


def test_readiness_names_a_secret_no_configured_key_opens(settings, alice) -> None:
    others = list(settings.FIELD_ENCRYPTION_KEYS)  # the credential's
    settings.FIELD_ENCRYPTION_KEYS = [OLD, *others]
    endpoint, whsec = endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice
    )
    health.secrets_check.forget()
    assert health.secrets_check() is None

    settings.FIELD_ENCRYPTION_KEYS = [NEW, *others]  # the old key dropped before rotating
    health.secrets_check.forget()
    response = Client().get("/readyz")
    assert response.status_code == 503
    failing = " ".join(response.json()["failing"])
    assert f"notifications.WebhookEndpoint pk={endpoint.pk} secret_encrypted" in failing
    assert whsec not in failing and WebhookEndpoint.objects.get().secret_encrypted not in failing


def test_a_webhook_whose_secret_does_not_decrypt_says_so_on_its_delivery(
    settings, alice, receiver, make_rental, move_rental
) -> None:
    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    endpoint_create(customer=alice.memberships.get().customer, url=receiver.url, events=["*"], created_by=alice)
    settings.FIELD_ENCRYPTION_KEYS = [NEW]
    move_rental(make_rental(user=alice, status="sending"))
    assert deliver_all() == ["retry"]
    from notifications.models import Delivery

    assert "FIELD_ENCRYPTION_KEYS" in Delivery.objects.get().last_error and not receiver.requests


def test_rotation_goes_on_past_a_row_no_key_opens_names_it_and_fails(settings, alice) -> None:
    others = list(settings.FIELD_ENCRYPTION_KEYS)  # the credential's
    settings.FIELD_ENCRYPTION_KEYS = [OLD, *others]
    acme = alice.memberships.get().customer
    lost, _ = endpoint_create(customer=acme, url="http://127.0.0.1:9/a", events=["*"], created_by=alice)
    settings.FIELD_ENCRYPTION_KEYS = others  # OLD lost before rotating
    kept, kept_secret = endpoint_create(customer=acme, url="http://127.0.0.1:9/b", events=["*"], created_by=alice)
    settings.FIELD_ENCRYPTION_KEYS = [NEW, *others]
    status, report = check_secrets()
    assert status == 1 and f"notifications.WebhookEndpoint pk={lost.pk} secret_encrypted" in report

    err = StringIO()
    with pytest.raises(CommandError, match="1 secret"):
        call_command("rotate_secrets", stdout=StringIO(), stderr=err)
    assert f"pk={lost.pk}" in err.getvalue() and f"pk={kept.pk}" not in err.getvalue()
    settings.FIELD_ENCRYPTION_KEYS = [NEW]  # the rows that could be rotated need only the new key now
    assert WebhookEndpoint.objects.get(pk=kept.pk).get_secret() == kept_secret
    assert [row for row in check_secrets()[1].splitlines() if "pk=" in row] == [
        f"Does not decrypt under any configured key: notifications.WebhookEndpoint pk={lost.pk} secret_encrypted"
    ]


def test_check_secrets_lists_rows_still_needing_an_older_key(settings, alice) -> None:
    endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/a", events=["*"], created_by=alice
    )
    settings.FIELD_ENCRYPTION_KEYS = [NEW, *settings.FIELD_ENCRYPTION_KEYS]
    status, report = check_secrets()
    assert status == 0 and "Still needs an older key" in report and "WebhookEndpoint" in report
    call_command("rotate_secrets", stdout=StringIO())
    assert "Still needs an older key" not in check_secrets()[1]
