"""Every URL of the project, read by support: a page that shows a customer's data leaves an audit entry.

Sam (support, no membership) GETs every named URL in the world of tests/site/test_url_permissions.py, where
Acme's data carries markers (its rental's id, its members' addresses, its webhook endpoint and delivery, its
teammate). A page that shows any marker must leave a support view on the rental's timeline or a SupportRead
of Acme. A page that shows no customer's records is listed in NO_CUSTOMER_DATA with the reason, and must
indeed show no marker; any other page must show a marker in this world (so a new page is classified, not
forgotten: give the world the data it shows, or list it here).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import SupportRead
from rentals.models import Rental, RentalEvent
from tests.site.test_url_permissions import SAM, project_url_names, url_for
from tests.site.test_url_permissions import world as world  # the fixture, used by name

NO_CUSTOMER_DATA = {
    "home": "a redirect to the reader's start page",
    "healthz": "the process's health",
    "readyz": "the dependencies' health",
    "metrics": "counters over every customer, no customer's record",
    "login": "the login form",
    "logout": "POST only",
    "password_change": "a redirect to the reader's own password page",
    # django-allauth: the reader's own account (sign-in, password, e-mail, two-factor, sessions).
    **dict.fromkeys(
        [
            "account_login",
            "account_logout",
            "account_inactive",
            "account_signup",
            "account_reauthenticate",
            "account_request_reauthentication_code",
            "account_confirm_reauthentication_code",
            "account_email",
            "account_email_verification_sent",
            "account_confirm_email",
            "account_change_password",
            "account_set_password",
            "account_reset_password",
            "account_reset_password_done",
            "account_reset_password_from_key",
            "account_reset_password_from_key_done",
            "account_confirm_login_code",
            "mfa_index",
            "mfa_authenticate",
            "mfa_reauthenticate",
            "mfa_activate_totp",
            "mfa_deactivate_totp",
            "mfa_view_recovery_codes",
            "mfa_generate_recovery_codes",
            "mfa_download_recovery_codes",
            "usersessions_list",
            "socialaccount_connections",
            "socialaccount_login_cancelled",
            "socialaccount_login_error",
            "socialaccount_signup",
        ],
        "the reader's own account",
    ),
    "api:keys": "the reader's own API keys",
    "api:key_revoke": "POST only, the reader's own keys",
    "accounts:ssh_keys": "the reader's own SSH keys",
    "accounts:ssh_key_delete": "POST only, the reader's own keys",
    "notifications:preferences": "the reader's own e-mail choices",
    "rentals:fabric_list": "Lium's offers (free nodes and prices), no customer's record",
    "rentals:rent": "support cannot rent: a redirect to the fabrics",
    "rentals:rent_summary": "the price of nodes picked on the rent form, from Lium's offers",
    "rentals:customer_removal_policy": "the cluster life limits operators set for the customer, not its records",
    "ops:overview": "the staff's work list: counts per state and customer, and the rentals needing attention by "
    "pod name and state; opening one is audited",
    "ops:overview_panel": "the overview's polled part (as ops:overview)",
    "ops:pod_events": "events of our Lium accounts about pods no customer's rental holds",
    "ops:usage": "node-hours and cost summed per customer ref: a staff report of totals, no rental or member",
    "ops:usage_csv": "the same totals as ops:usage",
    "ops:audit": "the staff's own trail: who read or changed what, not the records themselves",
    "billing:budgets": "each customer's month total against its budget: a staff report of totals",
    "billing:invite_accept": "an invitation's landing page, naming only the inviting customer",
    "api-v1:openapi-json": "the API's schema",
    "api-v1:openapi-view": "the API's documentation",
    "api-v1:api-root": "404",
    "api-v1:api-not-found": "404",
    "api-v1:fabric_list": "Lium's offers, as rentals:fabric_list",
    "api-v1:fabric_nodes": "Lium's offers, as rentals:fabric_list",
}


def markers(data) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Acme's data in the world, by what it is."""
    return {
        "rental id": str(data["rental"].public_id),
        "member address": "192.0.2.1",
        "overlay address": "10.42.0.1",
        "webhook endpoint": data["endpoint"].url,
        "webhook delivery": str(data["delivery"].event_id),
        "teammate": "carol",
        "preset": data["preset"].name,
        "watch": data["watch"].gpu_type,
    }


def query_for(name: str, rental: Rental) -> dict[str, str]:
    """The query a reader would add to see Acme's data on the page (none for most)."""
    if name in {"billing:usage", "billing:usage_csv", "api-v1:usage"}:
        return {"month": f"{rental.rented_at:%Y-%m}"}
    if name == "ops:search":
        return {"q": "acme"}
    return {}


def audit_entries() -> int:
    return RentalEvent.objects.filter(kind=RentalEvent.Kind.SUPPORT_VIEW).count() + SupportRead.objects.count()


def test_every_url_listed_as_showing_no_customer_data_exists() -> None:
    assert not set(NO_CUSTOMER_DATA) - project_url_names(), "remove URLs that no longer exist"


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(project_url_names()))
def test_support_reading_a_customers_data_leaves_an_audit_entry(name: str, world) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    rental = world["rental"]
    Rental.objects.filter(pk=rental.pk).update(rented_at=timezone.now() - timedelta(hours=1))
    rental.refresh_from_db()
    client = Client()
    client.force_login(world["users"][SAM])
    headers = {"X-API-Key": world["keys"][SAM][1]} if name.startswith("api-v1:") else {}
    before = audit_entries()
    response = client.get(url_for(name, world), query_for(name, rental), headers=headers)
    body = b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()  # type: ignore[attr-defined]
    shown = [what for what, marker in markers(world).items() if marker in body]
    if name in NO_CUSTOMER_DATA or response.status_code != 200:
        assert not shown, f"{name} shows {shown} of Acme: audit it and take it off NO_CUSTOMER_DATA"
        return
    assert shown, (
        f"{name} shows none of Acme's data here: give the world the data it shows, or list it in "
        "NO_CUSTOMER_DATA with the reason"
    )
    assert audit_entries() > before, f"support read {shown} of Acme on {name} and no audit entry says so"
