"""Every URL of the project, tried as each persona: who gets in, who gets 403, who gets 404.

`EXPECTED` lists every named URL. A URL added without a line here fails
`test_every_url_has_a_permission_test`, so nobody can add a page and forget who may see it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accounts.models import SshPublicKey
from api.keys import api_key_create
from billing.invitations import invitation_create
from notifications.services import endpoint_create, endpoint_send_test
from presets.models import CapacityWatch, Preset
from rentals.models import ClusterMember, Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY

ANON, ALICE, BOB, SAM, OLGA = "anonymous", "alice", "bob", "sam", "olga"
LOGIN = "login"  # a redirect to the login page

# url name -> {(persona, method): expected status}. Alice owns the rental and the keys used in the URLs.
RENTAL_READ = {(ANON, "GET"): LOGIN, (ALICE, "GET"): 200, (BOB, "GET"): 404, (SAM, "GET"): 200, (OLGA, "GET"): 200}
RENTAL_WRITE = {(ANON, "POST"): LOGIN, (BOB, "POST"): 404, (SAM, "POST"): 403}
STAFF_PAGE = {(ANON, "GET"): LOGIN, (ALICE, "GET"): 403, (BOB, "GET"): 403, (SAM, "GET"): 200, (OLGA, "GET"): 200}
MEMBER_PAGE = {(ANON, "GET"): LOGIN, (ALICE, "GET"): 200, (SAM, "GET"): 200}
TEAM_WRITE = {(ANON, "POST"): LOGIN, (ALICE, "POST"): 403, (BOB, "POST"): 404, (SAM, "POST"): 403}
API_READ = {(ANON, "GET"): 401, (ALICE, "GET"): 200, (BOB, "GET"): 404, (SAM, "GET"): 200}

EXPECTED: dict[str, Mapping[tuple[str, str], object]] = {
    "home": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 302},
    "healthz": {(ANON, "GET"): 200},
    "readyz": {(ANON, "GET"): (200, 503)},
    "metrics": {(ANON, "GET"): 200},
    "login": {(ANON, "GET"): 200},
    "logout": {(ALICE, "POST"): 302},
    "password_change": {(ANON, "GET"): 302, (ALICE, "GET"): 302},  # to account_change_password
    # django-allauth: one's own account (password, e-mail, two-factor, sessions); no public sign-up.
    "account_login": {(ANON, "GET"): 200},
    "account_logout": {(ALICE, "POST"): 302},
    "account_inactive": {(ANON, "GET"): 200},
    "account_signup": {(ANON, "GET"): 200, (ANON, "POST"): 200},  # "sign-up is closed"
    "account_reauthenticate": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 200},
    # Re-authentication is by password or two-factor, never a code e-mailed (ACCOUNT_REAUTHENTICATION_METHODS).
    "account_request_reauthentication_code": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 403},
    "account_confirm_reauthentication_code": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 403},
    "account_email": {**MEMBER_PAGE, (BOB, "GET"): 200},
    "account_email_verification_sent": {(ANON, "GET"): 200},
    "account_confirm_email": {(ANON, "GET"): 200, (ALICE, "GET"): 200},  # an unknown key: "expired or invalid"
    "account_change_password": MEMBER_PAGE,
    "account_set_password": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 302},  # alice has a password: change it
    "account_reset_password": {(ANON, "GET"): 200, (ANON, "POST"): 200},
    "account_reset_password_done": {(ANON, "GET"): 200},
    "account_reset_password_from_key": {(ANON, "GET"): 200},  # an unknown key: "bad token"
    "account_reset_password_from_key_done": {(ANON, "GET"): 200},
    "account_confirm_login_code": {(ANON, "GET"): LOGIN},
    "mfa_index": MEMBER_PAGE,
    "mfa_authenticate": {(ANON, "GET"): 302},  # no sign-in in progress: back to sign-in
    "mfa_reauthenticate": {(ANON, "GET"): LOGIN},
    # Enrolling asks for the password again unless the sign-in was recent (test_account_mfa.py enrols).
    "mfa_activate_totp": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 302, (ALICE, "POST"): 302},
    "mfa_deactivate_totp": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 404},  # no TOTP to deactivate
    "mfa_view_recovery_codes": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 404},
    "mfa_generate_recovery_codes": {(ANON, "GET"): LOGIN},
    "mfa_download_recovery_codes": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 404},
    "usersessions_list": {**MEMBER_PAGE, (BOB, "GET"): 200},
    "socialaccount_connections": {(ANON, "GET"): LOGIN},
    "socialaccount_login_cancelled": {(ANON, "GET"): 200},
    "socialaccount_login_error": {(ANON, "GET"): 401},  # "third-party login failure"
    "socialaccount_signup": {(ANON, "GET"): 302},  # no sign-in through a provider in progress
    "api:keys": MEMBER_PAGE,
    "api:key_revoke": {(ANON, "POST"): LOGIN, (BOB, "POST"): 404},
    "accounts:ssh_keys": MEMBER_PAGE,
    "accounts:ssh_key_delete": {(ANON, "POST"): LOGIN, (BOB, "POST"): 404},
    "rentals:fabric_list": MEMBER_PAGE,
    "rentals:rent": {(ANON, "GET"): LOGIN, (SAM, "GET"): 302, (SAM, "POST"): 403},
    "rentals:rent_summary": {(ANON, "GET"): LOGIN},
    "rentals:rental_list": MEMBER_PAGE,
    "rentals:rental_detail": RENTAL_READ,
    "rentals:rental_progress": RENTAL_READ,
    "rentals:rental_terminate": {**RENTAL_WRITE, (BOB, "GET"): 404, (SAM, "GET"): 403},
    "rentals:rental_cancel": RENTAL_WRITE,
    "rentals:rental_reschedule": RENTAL_WRITE,
    "rentals:rental_schedule_removal": RENTAL_WRITE,
    "rentals:rental_cancel_removal": RENTAL_WRITE,
    # Member repair: a confirm page (GET), then the click (POST; `{}` has no click token: back to the rental page).
    "rentals:member_reboot": {
        **RENTAL_WRITE,
        (BOB, "GET"): 404,
        (SAM, "GET"): 403,
        (ALICE, "GET"): 200,
        (OLGA, "GET"): 200,
    },
    "rentals:member_reset_gpu": {**RENTAL_WRITE, (BOB, "GET"): 404, (SAM, "GET"): 403, (ALICE, "POST"): 302},
    "rentals:rental_check_keep": RENTAL_WRITE,
    "rentals:rental_check_rent_again": RENTAL_WRITE,
    # Downloads of the connect panel: read like the rental page (the world's rental has members with SSH).
    "rentals:rental_ssh_config": RENTAL_READ,
    "rentals:rental_env_file": RENTAL_READ,
    # A customer's removal policy: staff read it, only operators change it.
    "rentals:customer_removal_policy": {**STAFF_PAGE, (SAM, "POST"): 403, (ALICE, "POST"): 403, (OLGA, "POST"): 302},
    "ops:overview": STAFF_PAGE,
    "ops:overview_panel": STAFF_PAGE,
    "ops:search": STAFF_PAGE,
    "ops:rental": STAFF_PAGE,
    "ops:rental_action": {**STAFF_PAGE, (SAM, "GET"): 403, (SAM, "POST"): 403, (ALICE, "POST"): 403},
    "ops:usage": STAFF_PAGE,
    "ops:usage_csv": STAFF_PAGE,
    "ops:audit": STAFF_PAGE,
    "ops:pod_events": STAFF_PAGE,
    "api-v1:openapi-json": {(ANON, "GET"): 200},
    "api-v1:openapi-view": {(ANON, "GET"): 200},
    "api-v1:api-root": {(ANON, "GET"): 404},
    "api-v1:api-not-found": {(ANON, "GET"): 404},
    "api-v1:fabric_list": {(ANON, "GET"): 401},
    "api-v1:fabric_nodes": {(ANON, "GET"): 401},
    "api-v1:rental_list": {(ANON, "GET"): 401, (ALICE, "GET"): 200, (SAM, "GET"): 200},
    "api-v1:rental_create": {(ANON, "POST"): 401, (SAM, "POST"): 403},
    "api-v1:rental_get": API_READ,
    "api-v1:rental_terminate": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403},
    "api-v1:rental_start_set": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403, (ALICE, "POST"): 422},
    "api-v1:rental_cancel": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403},
    # `{}` names neither hours nor a time: 422. DELETE (cancel) shares the path; tests/api covers it.
    "api-v1:rental_removal_set": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403, (ALICE, "POST"): 422},
    "api-v1:rental_removal_cancel": {(ANON, "GET"): 405, (ALICE, "GET"): 405},
    "api-v1:member_reboot": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403, (ALICE, "POST"): 202},
    "api-v1:member_reset_gpu": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403, (OLGA, "POST"): 202},
    # Webhooks and e-mail (notifications): the endpoint alice made; only Acme's admins and operators change
    # endpoints (alice is a plain member here: she reads them); support reads every log and changes nothing.
    "notifications:webhook_list": {**MEMBER_PAGE, (BOB, "GET"): 200, (SAM, "POST"): 403, (ALICE, "POST"): 403},
    "notifications:webhook_detail": RENTAL_READ,
    "notifications:webhook_test": {**RENTAL_WRITE, (ALICE, "POST"): 403, (OLGA, "POST"): 302, (ALICE, "GET"): 405},
    "notifications:webhook_redeliver": {**RENTAL_WRITE, (ALICE, "POST"): 403, (OLGA, "POST"): 302},
    "notifications:webhook_delete": {**RENTAL_WRITE, (ALICE, "POST"): 403},
    "notifications:preferences": {**MEMBER_PAGE, (BOB, "POST"): 302},
    "api-v1:webhook_list": {(ANON, "GET"): 401, (ALICE, "GET"): 200, (SAM, "GET"): 200},
    "api-v1:webhook_create": {(ANON, "POST"): 401, (SAM, "POST"): 403, (ALICE, "POST"): 422},
    "api-v1:webhook_delete": {(ANON, "GET"): 405},
    "api-v1:webhook_test": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403, (ALICE, "POST"): 403},
    "api-v1:webhook_deliveries": API_READ,
    "api-v1:webhook_redeliver": {(ANON, "POST"): 401, (BOB, "POST"): 404, (SAM, "POST"): 403},
    # Money (billing): usage is scoped by membership; Acme's team is changed by its admins and operators only
    # (alice is a plain member here); support reads and changes nothing.
    "billing:usage": {**MEMBER_PAGE, (BOB, "GET"): 200, (OLGA, "GET"): 200},
    "billing:usage_csv": {**MEMBER_PAGE, (BOB, "GET"): 200, (OLGA, "GET"): 200},
    "billing:team": RENTAL_READ,
    "billing:invite_create": {**TEAM_WRITE, (OLGA, "POST"): 302, (ALICE, "GET"): 405},
    "billing:invite_revoke": {**TEAM_WRITE, (OLGA, "POST"): 302},
    "billing:member_remove": {**TEAM_WRITE, (OLGA, "POST"): 302},
    "billing:member_admin": {**TEAM_WRITE, (OLGA, "POST"): 302},
    "billing:budget_set": {**TEAM_WRITE, (OLGA, "POST"): 302},
    "billing:quota_set": {**TEAM_WRITE, (OLGA, "POST"): 302},
    # A team's sign-in: require two-factor, a member's sessions (their addresses: managers only, not support).
    "billing:two_factor_require": {**TEAM_WRITE, (OLGA, "POST"): 302, (ALICE, "GET"): 405},
    "billing:member_sessions": {
        (ANON, "GET"): LOGIN,
        (ALICE, "GET"): 403,
        (BOB, "GET"): 404,
        (SAM, "GET"): 403,
        (OLGA, "GET"): 200,
    },
    "billing:member_sessions_end": {**TEAM_WRITE, (OLGA, "POST"): 302, (OLGA, "GET"): 405},
    # The link lands on invite_landing (token kept in the session) and goes on to invite_accept, whose URL has none:
    # opened without a landing first, it says so.
    "billing:invite_landing": {(ANON, "GET"): 302, (ALICE, "GET"): 302, (BOB, "POST"): 302},
    "billing:invite_accept": {(ANON, "GET"): 410, (ALICE, "GET"): 410, (BOB, "POST"): 410},
    "billing:budgets": STAFF_PAGE,
    # Single sign-on: a customer's provider is set by its admins and operators (alice is a plain member here);
    # "sign in with your company" is for anyone; a provider id without a configuration is 404.
    "sso:config": {(ANON, "GET"): LOGIN, (ALICE, "GET"): 403, (BOB, "GET"): 404, (SAM, "GET"): 403, (OLGA, "GET"): 200},
    "sso:config_remove": {**TEAM_WRITE, (OLGA, "POST"): 302, (OLGA, "GET"): 405},
    "sso:start": {(ANON, "GET"): 200, (ANON, "POST"): 400, (ALICE, "GET"): 200},
    "sso_login": {(ANON, "GET"): 404},
    "sso_callback": {(ANON, "GET"): 404},
    "api-v1:usage": {(ANON, "GET"): 401, (ALICE, "GET"): 200, (BOB, "GET"): 200, (SAM, "GET"): 200},
    # Presets and capacity watches: shared within Acme (alice's); support reads the lists and changes nothing.
    # Using a preset or renting again reads offers (none at lium.invalid): back to the fabrics page.
    "presets:preset_list": {**MEMBER_PAGE, (BOB, "GET"): 200, (SAM, "POST"): 403, (ALICE, "POST"): 200},
    "presets:preset_from_rent_form": {(ANON, "POST"): LOGIN, (SAM, "POST"): 403, (ALICE, "GET"): 405},
    "presets:preset_use": {(ANON, "GET"): LOGIN, (BOB, "GET"): 404, (SAM, "GET"): 404, (ALICE, "GET"): 302},
    "presets:preset_delete": {(ANON, "POST"): LOGIN, (BOB, "POST"): 404, (SAM, "POST"): 404},
    "presets:rental_rent_again": {(ANON, "GET"): LOGIN, (BOB, "GET"): 404, (SAM, "GET"): 403, (ALICE, "GET"): 302},
    "presets:watch_list": {**MEMBER_PAGE, (BOB, "GET"): 200, (SAM, "POST"): 403, (ALICE, "POST"): 200},
    "presets:watch_cancel": {(ANON, "POST"): LOGIN, (BOB, "POST"): 404, (SAM, "POST"): 404, (ALICE, "POST"): 302},
    "api-v1:preset_list": {(ANON, "GET"): 401, (ALICE, "GET"): 200, (BOB, "GET"): 200, (SAM, "GET"): 200},
    "api-v1:preset_create": {(ANON, "POST"): 401, (SAM, "POST"): 403, (ALICE, "POST"): 422},
    "api-v1:preset_delete": {(ANON, "GET"): 405},
    "api-v1:watch_list": {(ANON, "GET"): 401, (ALICE, "GET"): 200, (SAM, "GET"): 200},
    "api-v1:watch_create": {(ANON, "POST"): 401, (SAM, "POST"): 403, (ALICE, "POST"): 422},
    "api-v1:watch_cancel": {(ANON, "GET"): 405},
}


def project_url_names() -> set[str]:
    """Every named URL outside the Django admin (which checks is_staff itself)."""
    names: set[str] = set()

    def walk(patterns, namespace: str | None) -> None:  # type: ignore[no-untyped-def]
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace == "admin":
                    continue
                inner = ":".join(filter(None, [namespace, pattern.namespace])) or None
                walk(pattern.url_patterns, inner)
            elif isinstance(pattern, URLPattern) and pattern.name:
                names.add(f"{namespace}:{pattern.name}" if namespace else pattern.name)

    walk(get_resolver().url_patterns, None)
    return names


def test_every_url_has_a_permission_test() -> None:
    missing = project_url_names() - set(EXPECTED)
    assert not missing, f"add these URLs to EXPECTED with who may use them: {sorted(missing)}"


@pytest.fixture
def world(alice, bob, sam, olga, carol, monkeypatch):  # type: ignore[no-untyped-def]
    """Alice's rental, her saved SSH key and API key; every persona with an API key of all scopes."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name="job", public_keys=[SSH_KEY])
    rental = rental_submit(user=alice, customer=alice.memberships.get().customer, order=order, customer_ref="acme")
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1")
    add_members(rental)
    ssh_key = SshPublicKey.objects.create(user=alice, name="laptop", public_key=SSH_KEY)
    endpoint, _secret = endpoint_create(
        customer=rental.customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice
    )
    delivery = endpoint_send_test(endpoint=endpoint)
    invitation = invitation_create(customer=rental.customer, created_by=olga)
    keys = {
        user.username: api_key_create(user=user, name="k", scopes=["read", "rent", "manage"])
        for user in (alice, bob, sam, olga)
    }
    data = {
        "rental": rental,
        "ssh_key": ssh_key,
        "endpoint": endpoint,
        "delivery": delivery,
        "api_key": keys["alice"][0],
        "keys": keys,
        "users": {ALICE: alice, BOB: bob, SAM: sam, OLGA: olga},
        "invitation": invitation,
        "carol_membership": carol.memberships.get(),
        "preset": Preset.objects.create(
            customer=rental.customer, name="acme-nightly", node_count=2, pod_name="job", ssh_public_keys=SSH_KEY
        ),
    }
    # The watch names Acme's preset, so its lists show Acme's data (tests/site/test_support_read_audit.py).
    data["watch"] = CapacityWatch.objects.create(
        customer=rental.customer,
        node_count=2,
        gpu_type="GB200-acme-watch",
        expires_at=timezone.now(),
        preset=data["preset"],
    )
    return data


def add_members(rental: Rental) -> None:
    """Give the rental two running members with SSH, overlay IPs and a Jupyter URL (the connect panel's input)."""
    for rank in (0, 1):
        ClusterMember.objects.create(
            rental=rental,
            pod_id=f"pod-{rank}",
            rank=rank,
            status="RUNNING",
            overlay_ip=f"10.42.0.{rank + 1}",
            ssh_command=f"ssh root@192.0.2.{rank + 1} -p 2200{rank}",
            jupyter_url=f"http://192.0.2.{rank + 1}:38888/lab?token=t{rank}",
            ports_mapping={"22": 22000 + rank, "8888": 38888},
        )


def url_for(name: str, world) -> str:  # type: ignore[no-untyped-def]
    public_id = world["rental"].public_id
    kwargs = {
        "rentals:rental_env_file": {"public_id": public_id, "rank": 0},
        "api-v1:rental_removal_set": {"rental_id": public_id},
        "api-v1:rental_start_set": {"rental_id": public_id},
        "api-v1:rental_cancel": {"rental_id": public_id},
        "api-v1:rental_removal_cancel": {"rental_id": public_id},
        "rentals:member_reboot": {"public_id": public_id, "rank": 0},
        "rentals:member_reset_gpu": {"public_id": public_id, "rank": 0},
        "api-v1:member_reboot": {"rental_id": public_id, "rank": 0},
        "api-v1:member_reset_gpu": {"rental_id": public_id, "rank": 1},
        "api:key_revoke": {"pk": world["api_key"].pk},
        "accounts:ssh_key_delete": {"pk": world["ssh_key"].pk},
        "ops:rental_action": {"public_id": public_id, "action": "cancel"},
        "api-v1:rental_get": {"rental_id": public_id},
        "api-v1:rental_terminate": {"rental_id": public_id},
        "notifications:webhook_redeliver": {"pk": world["endpoint"].pk, "delivery_pk": world["delivery"].pk},
        "api-v1:webhook_redeliver": {"webhook_id": world["endpoint"].pk, "delivery_id": world["delivery"].pk},
    }.get(name)
    if kwargs is None and name in {
        "notifications:webhook_detail",
        "notifications:webhook_test",
        "notifications:webhook_delete",
    }:
        kwargs = {"pk": world["endpoint"].pk}
    if kwargs is None and name in {"api-v1:webhook_delete", "api-v1:webhook_test", "api-v1:webhook_deliveries"}:
        kwargs = {"webhook_id": world["endpoint"].pk}
    if kwargs is None and name in {
        "rentals:rental_detail",
        "rentals:rental_progress",
        "rentals:rental_terminate",
        "rentals:rental_cancel",
        "rentals:rental_reschedule",
        "rentals:rental_schedule_removal",
        "rentals:rental_cancel_removal",
        "rentals:rental_check_keep",
        "rentals:rental_check_rent_again",
        "rentals:rental_ssh_config",
        "ops:rental",
    }:
        kwargs = {"public_id": public_id}
    customer_id = world["rental"].customer_id
    kwargs = kwargs or {
        "billing:team": {"customer_id": customer_id},
        "sso:config": {"customer_id": customer_id},
        "sso:config_remove": {"customer_id": customer_id},
        "sso_login": {"provider_id": f"customer-{customer_id}"},
        "sso_callback": {"provider_id": f"customer-{customer_id}"},
        "billing:invite_create": {"customer_id": customer_id},
        "billing:budget_set": {"customer_id": customer_id},
        "billing:quota_set": {"customer_id": customer_id},
        "rentals:customer_removal_policy": {"customer_id": customer_id},
        "billing:invite_revoke": {"customer_id": customer_id, "pk": world["invitation"].invitation.pk},
        "billing:member_remove": {"customer_id": customer_id, "pk": world["carol_membership"].pk},
        "billing:member_admin": {"customer_id": customer_id, "pk": world["carol_membership"].pk},
        "billing:two_factor_require": {"customer_id": customer_id},
        "billing:member_sessions": {"customer_id": customer_id, "pk": world["carol_membership"].pk},
        "billing:member_sessions_end": {"customer_id": customer_id, "pk": world["carol_membership"].pk},
        "billing:invite_landing": {"token": world["invitation"].token},
        "presets:preset_use": {"preset_id": world["preset"].pk},
        "presets:preset_delete": {"preset_id": world["preset"].pk},
        "presets:rental_rent_again": {"public_id": public_id},
        "presets:watch_cancel": {"watch_id": world["watch"].pk},
        "api-v1:preset_delete": {"preset_id": world["preset"].pk},
        "api-v1:watch_cancel": {"watch_id": world["watch"].pk},
        "account_confirm_email": {"key": "no-such-key"},
        "account_reset_password_from_key": {"uidb36": "zz", "key": "no-such-key"},
    }.get(name)
    if name == "api-v1:api-not-found":
        return "/api/v1/no/such/thing"
    return reverse(name, kwargs=kwargs)


CASES = [(name, persona, method) for name, rules in EXPECTED.items() for (persona, method) in rules]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "persona", "method"), CASES, ids=[f"{n}-{p}-{m}" for n, p, m in CASES])
def test_who_may_use_each_url(name: str, persona: str, method: str, world) -> None:  # type: ignore[no-untyped-def]
    expected = EXPECTED[name][(persona, method)]
    client = Client()
    headers = {}
    if persona != ANON:
        client.force_login(world["users"][persona])
        if name.startswith("api-v1:"):
            headers["X-API-Key"] = world["keys"][persona][1]
    url = url_for(name, world)
    response = (
        client.get(url, headers=headers)
        if method == "GET"
        else client.post(
            url,
            data="{}" if name.startswith("api-v1:") else {},
            content_type="application/json" if name.startswith("api-v1:") else "application/x-www-form-urlencoded",
            headers=headers,
        )
    )
    if expected == LOGIN:
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    elif isinstance(expected, tuple):
        assert response.status_code in expected
    else:
        assert response.status_code == expected
    if name != "readyz":  # 503 is readyz's way of saying "not ready", not an error
        assert response.status_code < 500
