"""Fuzz every page's GET and POST parameters: whatever a browser (or a bot) sends, no page answers 5xx.

Every named URL outside the JSON API (schemathesis fuzzes that, tests/api/test_api_fuzz.py) and the Django
admin is tried as an operator and as a customer, with the parameters the views read plus random ones, and
values that broke parsers before: huge or negative numbers, NUL bytes, unicode, very long strings, lists.
The upstream is a fake that answers 503, so pages also meet its failure.
"""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from accounts.models import SshPublicKey
from api.keys import api_key_create
from billing.invitations import invitation_create
from notifications.services import endpoint_create, endpoint_send_test
from presets.models import CapacityWatch, Preset
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY
from tests.site.test_url_permissions import add_members, project_url_names, url_for
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db

# Not pages: the JSON API, probes whose 503 means "not ready", and the logout that would end the session.
SKIPPED = {"readyz", "logout", "account_logout"}
PAGES = sorted(name for name in project_url_names() if not name.startswith("api-v1:") and name not in SKIPPED)

# The parameters each page reads (grep request.GET / request.POST and the forms' fields); every page also
# gets the names of all the others and random ones.
RENT_FORM = [
    "fabric", "customer", "executor_ids", "pod_name", "saved_keys", "ssh_public_keys", "template_id",
    "initial_port_count", "termination_hours", "enable_jupyter", "enable_volume_encryption", "enable_backups",
    "volume_id", "backup_log_id", "restore_path", "skip_add_agent_ssh_key", "ncu_profiling", "customer_ref",
    "submit_token",
]  # fmt: skip
NAMES_READ = {
    "rentals:fabric_list": ["refresh", "gpu", "type", "min_free", "sort", "customer"],
    "rentals:rent": ["cheapest", *RENT_FORM],
    "rentals:rent_summary": ["fabric", "customer", "executor_ids"],
    "rentals:rental_list": ["status", "ref", "before", "fragment"],
    "rentals:rental_progress": ["v", "d", "t"],
    "rentals:rental_terminate": ["reason"],
    "rentals:rental_cancel": ["reason"],
    "rentals:rental_schedule_removal": ["hours", "extend_hours"],
    "rentals:customer_removal_policy": ["default_hours", "max_hours"],
    "api:keys": ["name", "scopes", "expires_in_days"],
    "accounts:ssh_keys": ["name", "public_key"],
    "ops:search": ["q"],
    "ops:rental_action": ["reason", "confirm", "outcome"],
    "ops:usage": ["start", "end"],
    "ops:usage_csv": ["start", "end"],
    "ops:audit": ["user", "kind", "since", "until", "page"],
    "ops:pod_events": ["page"],
    "login": ["login", "password", "next"],
    "account_change_password": ["oldpassword", "password1", "password2"],
    "account_email": ["email", "action_add", "action_remove", "action_primary", "action_send"],
    "account_reset_password": ["email"],
    "usersessions_list": ["action"],
}
ALL_NAMES = sorted({name for names in NAMES_READ.values() for name in names})

# Text a browser can send (no lone surrogates: those cannot be encoded at all).
TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)
VALUE = st.one_of(
    TEXT,
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(
        [
            "9" * 5000,
            "-1",
            "0",
            "1e400",
            "nan",
            "\x00",
            "a\x00b",
            "x" * 10_000,
            "ü😀",
            "9999-12-31T23:59:59+00:00_1",
            "0001-01-01T00:00:00-23:59_5",
            "2024-02-30",
            "00000000-0000-0000-0000-000000000000",
            "ready",
            "rows",
            "1",
            "on",
        ]
    ),
    st.uuids().map(str),
)


def params_for(page: str) -> st.SearchStrategy[dict]:
    """Return random parameters: mostly the page's own names, some of other pages', some made up."""
    names = st.one_of(st.sampled_from(NAMES_READ.get(page) or ALL_NAMES), st.sampled_from(ALL_NAMES), TEXT.filter(bool))
    return st.dictionaries(names, st.one_of(VALUE, st.lists(VALUE, min_size=1, max_size=3)), max_size=6)


@pytest.fixture
def world(alice, olga, carol, monkeypatch):  # type: ignore[no-untyped-def]
    """Alice's ready rental, her saved SSH and API keys, fake offers, no broker and an upstream that fails."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    offer_fakes.install(monkeypatch, lambda credential: [node("n-1", "1.00"), node("n-2", "2.00")])
    failing = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(503, json={})))
    monkeypatch.setattr("rentals.upstream.shared_http_client", lambda: failing)
    order = RentOrder(fabric_id=FABRIC, executor_ids=["n-1", "n-2"], pod_name="job", public_keys=[SSH_KEY])
    rental = rental_submit(user=alice, customer=alice.memberships.get().customer, order=order, customer_ref="acme")
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1")
    add_members(rental)
    monkeypatch.setattr("notifications.services.delivery_enqueue", lambda *a, **k: None)
    endpoint, _secret = endpoint_create(
        customer=rental.customer, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice
    )
    return {
        "rental": rental,
        "endpoint": endpoint,
        "invitation": invitation_create(customer=rental.customer, created_by=olga),
        "carol_membership": carol.memberships.get(),
        "delivery": endpoint_send_test(endpoint=endpoint),
        "ssh_key": SshPublicKey.objects.create(user=alice, name="laptop", public_key=SSH_KEY),
        "api_key": api_key_create(user=alice, name="k", scopes=["read"])[0],
        "users": {"operator": olga, "customer": alice},
        "preset": Preset.objects.create(
            customer=rental.customer, name="p", node_count=2, pod_name="job", ssh_public_keys=SSH_KEY
        ),
        "watch": CapacityWatch.objects.create(customer=rental.customer, node_count=2, expires_at=timezone.now()),
    }


def request_page(client: Client, url: str, fixed: dict, method: str, params: dict) -> int:
    """Send the request; `fixed` parameters go in the query string unless the example sets them."""
    query = {**fixed, **params} if method == "GET" else fixed
    if method == "GET":
        return client.get(url, query).status_code
    return client.post(f"{url}?{urlencode(query, doseq=True)}" if query else url, params).status_code


@pytest.mark.parametrize("persona", ["operator", "customer"])
@pytest.mark.parametrize("name", PAGES)
def test_no_page_answers_5xx_to_any_parameters(name: str, persona: str, world) -> None:  # type: ignore[no-untyped-def]
    client = Client()  # one session for all examples (the test client skips CSRF checks)
    client.force_login(world["users"][persona])
    url = url_for(name, world)
    # The rent form itself, not the redirect for an unknown fabric.
    fixed = {"fabric": FABRIC} if name in ("rentals:rent", "rentals:rent_summary") else {}

    @settings(
        max_examples=30,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(method=st.sampled_from(["GET", "POST"]), params=params_for(name))
    @example(method="GET", params={"cheapest": "9" * 5000, "min_free": "9" * 5000, "before": "1_" + "9" * 5000})
    @example(method="POST", params={"reason": "a\x00b", "hours": "9" * 5000, "name": "\x00"})
    @example(method="GET", params={"ref": "a\x00b", "q": "\x00", "user": "\x00"})
    def check(method: str, params: dict) -> None:
        status = request_page(client, url, fixed, method, params)
        assert status < 500, f"{method} {url} {params!r} answered {status}"

    check()
