"""Money in a real browser: the usage page and its CSV, budgets set by an operator and lowered by a customer
admin, and an invitation link that a newcomer uses to sign up. Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone

from accounts.models import Membership
from billing.invitations import admin_set
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]


@pytest.fixture
def running(monkeypatch: pytest.MonkeyPatch, acme, alice) -> Callable[..., Rental]:  # type: ignore[no-untyped-def]
    """Return a function that makes one of Acme's clusters, running since `hours` ago at `price` USD/hour."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)

    def make(pod_name: str, price: str, hours: float) -> Rental:
        order = RentOrder(
            fabric_id="fab",
            executor_ids=[f"{pod_name}-a", f"{pod_name}-b"],
            pod_name=pod_name,
            public_keys=[SSH_KEY],
            price_per_hour=Decimal(price),
        )
        rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
        Rental.objects.filter(pk=rental.pk).update(
            status="ready", cluster_id=f"cl-{pod_name}", rented_at=timezone.now() - timedelta(hours=hours)
        )
        return rental

    return make


def test_a_member_reads_usage_and_the_csv_says_the_same(page: Page, log_in, running, shot: Shot, bob) -> None:  # type: ignore[no-untyped-def]
    running("train-7b", "12.3456", 2.5)
    running("eval-7b", "3.3333", 0.75)
    log_in("alice")
    page.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage and cost")).to_be_visible()
    lines = page.get_by_test_id("usage-lines")
    expect(lines).to_contain_text("train-7b")
    expect(lines).to_contain_text("so far")
    total = page.get_by_test_id("total").inner_text().strip()
    shot(page, "usage")

    with page.expect_download() as download:
        page.get_by_test_id("csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert rows[-1]["cost_usd"] == total
    assert sorted(row["pod_name"] for row in rows[:-1]) == ["eval-7b", "train-7b"]
    assert Decimal(total) > 0


def test_an_operator_sets_a_budget_and_a_customer_admin_lowers_it(
    page: Page, browser: Browser, live_server, log_in, running, shot: Shot, olga, alice, acme
) -> None:  # type: ignore[no-untyped-def]
    admin_set(membership=Membership.objects.get(user=alice, customer=acme), admin=True)
    running("big-run", "40.00", 3)  # $120 so far
    log_in("olga")
    page.goto(f"/customers/{acme.pk}/team/")
    form = page.get_by_test_id("operator-budget-form")
    form.get_by_label("Monthly budget (USD)").fill("500")
    form.get_by_label(re.compile("Enforce")).check()
    form.get_by_role("button", name="Save the budget").click()
    expect(page.get_by_role("status")).to_contain_text("budget of Acme Research is saved")
    shot(page, "operator-budget")

    alice_page = browser.new_context(base_url=live_server.url).new_page()
    alice_page.goto("/accounts/login/")
    alice_page.get_by_label("Username").fill("alice")
    alice_page.get_by_label("Password").fill("pw")
    alice_page.get_by_role("button", name="Log in").click()
    alice_page.goto(f"/customers/{acme.pk}/team/")
    own = alice_page.get_by_test_id("customer-budget-form")
    own.get_by_label("Our own monthly budget (USD)").fill("900")
    own.get_by_role("button", name="Save our budget").click()
    expect(alice_page.get_by_role("alert")).to_contain_text("at most the operators' budget of $500.00")
    own = alice_page.get_by_test_id("customer-budget-form")
    own.get_by_label("Our own monthly budget (USD)").fill("100")
    own.get_by_role("button", name="Save our budget").click()
    expect(alice_page.get_by_test_id("budget-usd")).to_have_text("$100.00")
    alice_page.goto("/usage/")
    expect(alice_page.get_by_test_id("budget-reached")).to_be_visible()
    shot(alice_page, "budget-reached")


def test_an_invited_newcomer_signs_up_and_sees_only_the_inviting_customer(
    page: Page, browser: Browser, live_server, log_in, running, shot: Shot, alice, acme, globex
) -> None:  # type: ignore[no-untyped-def]
    admin_set(membership=Membership.objects.get(user=alice, customer=acme), admin=True)
    running("acme-only", "1.00", 1)
    log_in("alice")
    page.goto(f"/customers/{acme.pk}/team/")
    page.get_by_test_id("invite").click()
    link = page.get_by_test_id("invitation-link").inner_text().strip()
    shot(page, "invitation-link")
    page.reload()
    expect(page.get_by_test_id("invitation-link")).to_have_count(0)  # shown once

    newcomer = browser.new_context(base_url=live_server.url).new_page()
    newcomer.goto(link)
    expect(newcomer.get_by_text("You are invited to join")).to_contain_text("Acme Research")
    newcomer.get_by_label("Username").fill("dana")
    newcomer.get_by_label("Password", exact=True).fill("a-long pass 123")
    newcomer.get_by_label("Password confirmation").fill("a-long pass 123")
    newcomer.get_by_test_id("accept").click()
    expect(newcomer.get_by_role("status")).to_contain_text("You are now a member of Acme Research")
    expect(newcomer.get_by_text("acme-only")).to_be_visible()
    shot(newcomer, "newcomer-rentals")
    other = newcomer.goto(f"/customers/{globex.pk}/team/")
    assert other is not None and other.status == 404

    used = browser.new_context(base_url=live_server.url).new_page()
    used.goto(link)
    expect(used.get_by_test_id("invitation-problem")).to_contain_text("already used")
