"""Accessibility in a real browser: axe-core on every page for every persona, light and dark, and 375 px wide.

axe-core is the copy bundled by `axe-playwright-python` (pinned in pyproject.toml); a serious or critical
violation fails the test with each rule, its help text and the offending elements. The same pages are then
opened 375 px wide, where axe runs again (a box that scrolls only there must take the keyboard's focus) and the
page itself must not scroll sideways (tables and charts scroll in their own box). Screenshots
of every page, light and dark, at 1280 and 375 px, land in test-artifacts/screenshots/.

Rentals are made by the real engine, in-process, against the simulator (`rentals.enqueue._enqueue` is a no-op);
the other states are set straight in the database, as the pages only read them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from tests.browser.conftest import PASSWORD, SCREENSHOTS, BrowserProblems, totp_code_once
from tests.conftest import SSH_KEY, Simulator

try:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import Browser, BrowserContext, Page
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need playwright and axe-playwright-python (uv sync)", allow_module_level=True)

from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret

from accounts.models import SshPublicKey
from api.keys import api_key_create
from billing.invitations import admin_set, invitation_create
from billing.models import CustomerQuota
from billing.services import budget_set_by_operator
from notifications.services import endpoint_create, endpoint_send_test
from presets import watching
from presets.models import Preset
from rentals import engine
from rentals.models import ClusterMember, FabricCheck, Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.tracking.members import credential_pods_sync

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NARROW = 375
FAILING_IMPACTS = ("serious", "critical")
AXE = Axe()
# Pages that move on by design; every other page must be itself, not the sign-in or a "confirm your password" page.
LANDS_ON = {"invitation": "/invite/"}  # the token goes into the session, out of the address bar


WIDTHS = (1280, NARROW)
# Playwright's color_scheme, which `prefers-color-scheme` reads. The theme is CSS alone (site.css), so one load
# per width serves both: the scheme is switched on the loaded page.
COLOUR_SCHEMES = ("light", "dark")


@pytest.fixture
def world(simulator: Simulator, monkeypatch: pytest.MonkeyPatch, acme, alice, bob, sam, olga, carol) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Acme's rentals in several states (one really rented on the simulator, with members), alice as Acme's
    admin with a saved key, an API key, a webhook with a delivery and an open invitation; an admin. Acme has a
    budget and quotas (the usage chart's budget line, the team page's quotas card), a preset and a capacity watch;
    bob has recovery codes (no TOTP, so he still signs in with a password alone)."""
    from tests.conftest import _user

    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)
    admin_set(membership=alice.memberships.get(), admin=True)
    _user("admin", superuser=True)
    offer = simulator.offers()[0]

    def submit(pod_name: str, executors: list[str], fabric_id: str = "fab-a11y") -> Rental:
        order = RentOrder(fabric_id=fabric_id, executor_ids=executors, pod_name=pod_name, public_keys=[SSH_KEY])
        return rental_submit(user=alice, customer=acme, order=order, customer_ref="acme-team-7")

    running = submit("train-ready", [node["id"] for node in offer["nodes"][:2]], offer["fabric_id"])
    engine.rental_attempt(rental_id=running.pk)
    running.refresh_from_db()
    assert running.cluster_id, running.error_message
    assert credential_pods_sync(credential_id=running.credential_id, force=True)
    states: dict[str, dict[str, object]] = {
        "queued": {},
        "retrying": {"next_attempt_at": timezone.now() + timedelta(minutes=5)},
        "scheduled": {"start_at": timezone.now() + timedelta(hours=6)},
    }
    states |= {
        "refused": {"error_message": "not enough free nodes", "error_request_id": "req-a11y"},
        "unknown": {"error_message": "the answer was lost"},
        "terminated": {  # with a price: the usage page's spend per cluster draws
            "cluster_id": "cl-old",
            "rented_at": timezone.now() - timedelta(hours=3),
            "price_per_hour": Decimal("12.50"),
        },
    }
    rentals = {"rented": running}
    for state, fields in states.items():
        rental = submit(f"job-{state}", [f"{state}-a", f"{state}-b"])
        Rental.objects.filter(pk=rental.pk).update(status=state, **fields)
        rentals[state] = rental
    rentals["ready"] = ready_with_members(submit("job-ready", ["ready-a", "ready-b"]))
    rentals["check_failed"] = check_failed(submit("job-check", ["check-a", "check-b"]))
    SshPublicKey.objects.create(user=alice, name="laptop", public_key=SSH_KEY)
    api_key_create(user=alice, name="ci", scopes=["read"])
    endpoint, _secret = endpoint_create(customer=acme, url="http://127.0.0.1:9/hook", events=["*"], created_by=alice)
    endpoint_send_test(endpoint=endpoint)
    invitation = invitation_create(customer=acme, created_by=alice)
    budget_set_by_operator(customer=acme, monthly_budget_usd=Decimal(5000), enforce=False, grace_hours=24)
    CustomerQuota.objects.create(customer=acme, max_gpus=16, max_clusters=4, max_hourly_usd=Decimal(200))
    preset = Preset.objects.create(customer=acme, name="nightly", node_count=2, pod_name="job", ssh_public_keys=SSH_KEY)
    wanted = {"node_count": 2, "gpu_type": "H100", "max_price_per_node_hour": Decimal("17.5")}
    watching.watch_create(customer=acme, created_by=alice, fields=wanted, preset=preset)
    RecoveryCodes.activate(bob)
    return {
        "rentals": rentals,
        "offer": offer,
        "endpoint": endpoint,
        "customer": acme,
        "invitation": invitation,
        "carol": carol.memberships.get(),
    }


def ready_with_members(rental: Rental) -> Rental:
    """Make the rental ready with two running members (SSH, Jupyter, ports: the connect panel and repairs); its
    times draw the ops overview's time-to-ready chart."""
    now = timezone.now()
    Rental.objects.filter(pk=rental.pk).update(
        status="ready",
        cluster_id="cl-ready",
        gpu_type="H100",
        created_at=now - timedelta(minutes=4),
        first_sent_at=now - timedelta(minutes=4),
        rented_at=now - timedelta(minutes=3),
        ready_at=now - timedelta(minutes=1),
    )
    for rank in (0, 1):
        ClusterMember.objects.create(
            rental=rental,
            pod_id=f"pod-ready-{rank}",
            rank=rank,
            status="RUNNING",
            overlay_ip=f"10.42.0.{rank + 1}",
            ssh_command=f"ssh root@192.0.2.{rank + 1} -p 2200{rank}",
            jupyter_url=f"http://192.0.2.{rank + 1}:38888/lab?token=t{rank}",
            ports_mapping={"22": 22000 + rank, "8888": 38888},
        )
    return rental


def check_failed(rental: Rental) -> Rental:
    """Make the rental a verified one whose fabric check named rank 1 slow (the figures per pair, two buttons)."""
    Rental.objects.filter(pk=rental.pk).update(status="check_failed", cluster_id="cl-check", verify_fabric=True)
    FabricCheck.objects.create(
        rental=rental,
        status=FabricCheck.Status.FAILED,
        public_key_line="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFakeFakeFake check",
        link_rate_gbps=400,
        floor_gbps=2400,
        bus_bandwidth_gbps=900,
        pairs=[{"ranks": [0, 1], "bus_bandwidth_gbps": 900}],
        slow_ranks=[1],
        keys_removed=True,
        finished_at=timezone.now(),
    )
    return rental


def pages_for(persona: str, world: dict[str, Any]) -> dict[str, str]:
    """Label -> URL of every HTML page the persona can open (the URL confs, less downloads, JSON and POSTs)."""
    rentals, acme = world["rentals"], world["customer"]
    rented = rentals["rented"].public_id
    # allauth's pages first: its two-factor pages ask for the password again 5 minutes after `contexts` gave it
    every_member = {
        "reauthenticate": "/accounts/reauthenticate/",
        "account-email": "/accounts/email/",
        "two-factor": "/accounts/2fa/",
        "totp-activate": "/accounts/2fa/totp/activate/",
        "sessions": "/accounts/sessions/",
        "fabrics": "/fabrics/",
        "rent-form": f"/rent/?fabric={world['offer']['fabric_id']}&cheapest=2",
        "rentals": "/rentals/",
        "ssh-keys": "/profile/ssh-keys/",
        "api-keys": "/profile/api-keys/",
        "webhooks": "/profile/webhooks/",
        "notifications": "/profile/notifications/",
        "usage": "/usage/",
        "password": "/accounts/password/change/",
        "presets": "/presets/",
        "watches": "/watches/",
    }
    acme_pages = {f"rental-{state}": f"/rentals/{rental.public_id}/" for state, rental in rentals.items()}
    acme_pages |= {
        "webhook": f"/profile/webhooks/{world['endpoint'].pk}/",
        "team": f"/customers/{acme.pk}/team/",  # with its quotas card
    }
    managing = {  # the team's admins and operators, not support
        "member-sessions": f"/customers/{acme.pk}/team/members/{world['carol'].pk}/sessions/",
        "sso-config": f"/customers/{acme.pk}/sso/",
    }
    staff = {
        "ops-overview": "/ops/",
        "ops-search": "/ops/search/?q=acme",
        "ops-rental": f"/ops/rentals/{rented}/",
        "ops-usage": "/ops/usage/",
        "ops-audit": "/ops/audit/",
        "ops-pod-events": "/ops/pod-events/",
        "budgets": "/billing/budgets/",
        "removal-policy": f"/customers/{acme.pk}/removal-policy/",
    }
    acting = {
        "terminate-confirm": f"/rentals/{rented}/terminate/",
        # the ready rental's: its members run (a rental still coming up has nothing to reboot and goes back)
        "reboot-confirm": f"/rentals/{rentals['ready'].public_id}/members/0/reboot/",
    }
    if persona == "anonymous":
        return {
            "login": "/accounts/login/",
            "invitation": f"/invite/{world['invitation'].token}/",
            "password-reset": "/accounts/password/reset/",
            "password-reset-sent": "/accounts/password/reset/done/",
            "password-reset-done": "/accounts/password/reset/key/done/",
            "e-mail-confirmation-sent": "/accounts/confirm-email/",
            "sign-up": "/accounts/signup/",
            "inactive": "/accounts/inactive/",
            "sso-start": "/accounts/sso/",
            "sso-cancelled": "/accounts/3rdparty/login/cancelled/",
        }
    if persona == "bob":
        recovery = {"recovery-codes": "/accounts/2fa/recovery-codes/"}
        return recovery | {"recovery-codes-new": "/accounts/2fa/recovery-codes/generate/"} | every_member
    if persona == "alice":
        return every_member | acme_pages | managing | acting
    if persona == "sam":  # support reads only: the rent form sends it back to the fabrics
        return {label: url for label, url in every_member.items() if label != "rent-form"} | acme_pages | staff
    ops_action = {"ops-action": f"/ops/rentals/{rentals['unknown'].public_id}/reconcile/"}
    if persona == "admin":  # the Django admin's own pages too (its templates are Django's; they pass as they are)
        ops_action |= {"django-admin": "/admin/", "django-admin-rentals": "/admin/rentals/rental/"}
    return every_member | acme_pages | managing | staff | acting | ops_action  # olga, admin


@pytest.fixture
def contexts(
    browser: Browser, live_server: Any, browser_problems: BrowserProblems
) -> Iterator[Callable[[str], dict[int, Page]]]:
    """`contexts("alice")` logs alice in once and returns a page per width, sharing the login."""
    from django.core.cache import cache

    cache.clear()
    opened: list[BrowserContext] = []

    def watch(page: Page) -> Page:
        page.set_default_timeout(15_000)
        page.on(
            "console",
            lambda m: browser_problems.add(f"console.{m.type}: {m.text} ({m.location.get('url')})")
            if m.type == "error"
            else None,
        )
        page.on("pageerror", lambda error: browser_problems.add(f"page error: {error}"))
        page.on(
            "response",
            lambda r: browser_problems.add(f"HTTP {r.status} for {r.url}") if r.status >= 500 else None,
        )
        return page

    def open_for(username: str) -> dict[int, Page]:
        first = browser.new_context(base_url=live_server.url)
        opened.append(first)
        if username != "anonymous":
            login = watch(first.new_page())
            login.goto("/accounts/login/")
            login.get_by_label("Username").fill(username)
            login.get_by_label("Password").fill(PASSWORD)
            login.get_by_role("button", name="Log in").click()
            login.wait_for_url("**/fabrics/")
            # allauth's two-factor pages ask for the password again unless given in the last 5 minutes
            login.goto("/accounts/reauthenticate/?next=/accounts/2fa/")
            login.get_by_label("Password").fill(PASSWORD)
            login.get_by_role("button", name="Confirm").click()
            login.wait_for_url("**/accounts/2fa/")
        state = first.storage_state()
        pages = {}
        for width in WIDTHS:
            context = browser.new_context(
                base_url=live_server.url,
                storage_state=state,  # type: ignore[arg-type]
                viewport={"width": width, "height": 900},
            )
            opened.append(context)
            pages[width] = watch(context.new_page())
        return pages

    yield open_for
    for context in opened:
        context.close()
    if browser_problems.items:
        pytest.fail("the browser saw problems:\n" + "\n".join(browser_problems.items), pytrace=False)


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is, one readable block each."""
    found = []
    for violation in AXE.run(page).response["violations"]:
        if violation["impact"] not in FAILING_IMPACTS:
            continue
        nodes = "\n".join(
            f"      {' '.join(node['target'])}: {node.get('failureSummary', '').splitlines()[-1].strip()}"
            for node in violation["nodes"][:8]
        )
        found.append(f"  {violation['id']} ({violation['impact']}): {violation['help']}\n{nodes}")
    return found


def show_form_errors(persona: str, page: Page, world: dict[str, Any]) -> str:
    """Submit the persona's main form wrongly (a bad password; an order with a bad pod name), leaving its errors
    on the page; return what was submitted."""
    if persona == "anonymous":
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("nobody")
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("alert").wait_for()
        return "login-errors"
    page.goto(pages_for(persona, world)["rent-form"])
    page.get_by_label("Pod name").fill("Not A Valid Name!")  # passes the browser's checks, not the server's
    page.get_by_role("button", name="Rent cluster").click()
    page.locator(".has-error").first.wait_for()
    return "rent-form-errors"


def page_width(page: Page) -> int:
    return int(page.evaluate("document.scrollingElement.scrollWidth"))


def page_problems(page: Page, name: str, url: str, width: int) -> list[str]:
    """Screenshot the page as it is, light and dark; return what is too wide at 375 px and axe's serious findings."""
    page.wait_for_load_state("networkidle")
    problems = []
    for colours in COLOUR_SCHEMES:
        page.emulate_media(color_scheme=colours)  # type: ignore[arg-type]
        page.screenshot(path=str(SCREENSHOTS / f"a11y-{name}-{colours}-{width}.png"), full_page=True)
        if width == NARROW and (wide := page_width(page)) > NARROW:
            problems.append(f"{name} ({url}), {colours}: the page is {wide} px wide at {NARROW} px")
        # At both widths: a table or chart that scrolls in its own box only at 375 px must be reachable
        # from the keyboard there (axe's scrollable-region-focusable).
        violations = serious_violations(page)
        if violations:
            problems.append(f"{name} ({url}), {colours} {width} px:\n" + "\n".join(violations))
    return problems


@pytest.mark.parametrize("persona", ["anonymous", "alice", "bob", "sam", "olga", "admin"])
def test_every_page_passes_axe_light_and_dark_and_fits_375_px(persona: str, world, contexts, browser_problems) -> None:  # type: ignore[no-untyped-def]
    browser_problems.allow(r"404 .*/favicon\.ico")  # the Django admin's pages name no icon: Chromium asks anyway
    pages = contexts(persona)
    problems: list[str] = []
    for label, url in pages_for(persona, world).items():
        for width, page in pages.items():
            response = page.goto(url)
            assert response is not None and response.status == 200, f"{persona} could not open {label} ({url})"
            landed = urlsplit(page.url).path
            expected = LANDS_ON.get(label, urlsplit(url).path)
            assert landed == expected, f"{persona} opening {label} ({url}) landed on {landed}"
            problems += page_problems(page, f"{persona}-{label}", url, width)
    if persona in ("anonymous", "bob"):  # forms showing their errors: one persona each is enough
        for width, page in pages.items():
            label = show_form_errors(persona, page, world)
            for colours in COLOUR_SCHEMES:
                page.emulate_media(color_scheme=colours)  # type: ignore[arg-type]
                page.screenshot(path=str(SCREENSHOTS / f"a11y-{persona}-{label}-{colours}-{width}.png"))
                found = [f"the page is {page_width(page)} px wide"] if page_width(page) > width else []
                found += serious_violations(page)
                if found:
                    problems.append(f"{label}, {colours} {width} px:\n" + "\n".join(found))
    assert not problems, f"accessibility problems for {persona}:\n" + "\n".join(problems)


def test_the_two_factor_step_and_the_error_pages_pass_axe(world, browser, live_server, carol) -> None:  # type: ignore[no-untyped-def]
    """The pages no persona above opens: the sign-in's code step and switching TOTP off (carol has TOTP), and the
    refusals a signed-in member meets (403 on the ops pages, 404 for a page that does not exist, 401 for a failed
    company sign-in)."""
    secret = generate_totp_secret()
    TOTP.activate(carol, secret)
    problems: list[str] = []
    for width in WIDTHS:
        context = browser.new_context(base_url=live_server.url, viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("carol")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/accounts/2fa/authenticate/")
        problems += page_problems(page, "carol-two-factor-code", page.url, width)
        page.get_by_label("Code").fill(totp_code_once(secret))
        page.get_by_role("button", name="Sign In").click()
        page.wait_for_url("**/fabrics/")
        for label, url, status in (
            ("totp-deactivate", "/accounts/2fa/totp/deactivate/", 200),
            ("forbidden", "/ops/", 403),
            ("not-found", "/no-such-page/", 404),
            ("sso-error", "/accounts/3rdparty/login/error/", 401),  # a company sign-in that failed
        ):
            response = page.goto(url)
            assert response is not None and response.status == status, f"carol opening {label} ({url})"
            problems += page_problems(page, f"carol-{label}", url, width)
        context.close()
    assert not problems, "accessibility problems:\n" + "\n".join(problems)
