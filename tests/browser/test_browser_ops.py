"""Staff pages in a real browser: support search, a rental's timeline, an operator's reconciliation, refusals.

Rentals are made by the real engine, in-process, against the simulator over HTTP (`rentals.enqueue._enqueue` is
a no-op, so no worker is needed and nothing runs behind the test's back); Chromium then drives the live server
as sam (support) or olga (operator). Each test leaves screenshots in test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from django.utils import timezone

from tests.conftest import SSH_KEY, Simulator

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

from rentals import engine
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus
from rentals.tracking.members import credential_pods_sync

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]
ACTIONS = ("retry", "reconcile", "confirm", "terminate", "cancel")


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drive the engine from the test: enqueues (also the live server's) go nowhere."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)


@pytest.fixture
def order(simulator: Simulator, in_process: None, acme, alice) -> Callable[..., Rental]:
    """Submit alice's order for two nodes of the first fabric and make its first attempt in-process."""

    def submit(pod_name: str) -> Rental:
        offer = simulator.offers()[0]
        rental = rental_submit(
            user=alice,
            customer=acme,
            order=RentOrder(
                fabric_id=offer["fabric_id"],
                executor_ids=[node["id"] for node in offer["nodes"][:2]],
                pod_name=pod_name,
                public_keys=[SSH_KEY],
            ),
            customer_ref="acme-team-7",
        )
        engine.rental_attempt(rental_id=rental.pk)
        rental.refresh_from_db()
        return rental

    return submit


def attempt_again(rental: Rental) -> Rental:
    """Make a retrying rental due now and attempt it once more."""
    Rental.objects.filter(pk=rental.pk, status=RentalStatus.RETRYING).update(next_attempt_at=timezone.now())
    engine.rental_attempt(rental_id=rental.pk)
    rental.refresh_from_db()
    return rental


def ops_log_in(page: Page, log_in: Callable[[str], Page], username: str) -> None:
    log_in(username)
    page.goto("/ops/")
    expect(page.get_by_role("navigation", name="Operations")).to_be_visible()


def test_support_finds_a_rental_by_each_kind_of_identifier(
    simulator: Simulator, order, sam, log_in, page: Page, shot: Shot
) -> None:
    rental = order("bert-search-run")
    assert rental.status == RentalStatus.RENTED, rental.error_message
    assert credential_pods_sync(credential_id=rental.credential_id, force=True)
    member = ClusterMember.objects.filter(rental=rental).order_by("rank").first()
    assert member is not None and member.pod_id and member.overlay_ip and member.executor_id
    attempt = rental.attempts.get()
    assert attempt.request_id
    timeline_url = f"/ops/rentals/{rental.public_id}/"

    exact = {
        "rental id": str(rental.public_id),
        "idempotency key": str(rental.idempotency_key),
        "pod id": member.pod_id,
        "cluster id": rental.cluster_id,
        "executor id": rental.executor_ids[1],
        "overlay IP": member.overlay_ip,
        "upstream request id": attempt.request_id,
    }
    listed = {
        "customer ref": ("acme-team-7", "customer ref"),
        "customer name": ("Acme Research", "customer"),
        "user email": ("alice@example.com", "user"),
        "username": ("alice", "user"),
        "pod name": ("bert-search", "pod name"),
    }
    ops_log_in(page, log_in, "sam")
    box = page.get_by_role("searchbox", name="Find a rental")

    results_shot = False
    for kind, (text, found_by) in listed.items():
        page.goto("/ops/search/")
        box.fill(text)
        box.press("Enter")
        page.wait_for_url(re.compile(r"/ops/search/\?q="))
        row = page.get_by_test_id("results").locator("tbody tr").filter(has_text="bert-search-run")
        expect(row, kind).to_have_count(1)
        expect(row.locator("td").nth(5), kind).to_contain_text(found_by)
        if not results_shot:
            shot(page, "results")
            results_shot = True

    for kind, text in exact.items():
        page.goto("/ops/search/")
        box.fill(f" {text} ")
        page.get_by_role("button", name="Search").click()
        page.wait_for_url(f"**{timeline_url}")
        expect(page.locator("dl.facts dd").first, kind).to_have_text(str(rental.public_id))

    expect(page.get_by_test_id("status")).to_have_text(re.compile("Rented, nodes starting|Ready"))
    expect(page.get_by_test_id("actions")).to_have_count(0)  # support sees no action buttons
    shot(page, "timeline")


def test_the_timeline_lists_both_attempts_and_marks_the_replayed_one(
    simulator: Simulator, order, sam, log_in, page: Page, shot: Shot
) -> None:
    simulator.faults([{"fault": "drop_after_commit", "next": 1}])
    rental = order("replay-timeline")
    assert rental.status == RentalStatus.RETRYING
    rental = attempt_again(rental)
    assert rental.status == RentalStatus.RENTED
    assert len(simulator.ledger()) == 1

    ops_log_in(page, log_in, "sam")
    page.goto(f"/ops/rentals/{rental.public_id}/")
    attempts = page.get_by_test_id("timeline").locator("li.t-attempt")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_contain_text("Attempt 1")
    expect(attempts.nth(0).get_by_test_id("replayed")).to_have_count(0)
    expect(attempts.nth(1)).to_contain_text("Attempt 2")
    expect(attempts.nth(1).get_by_test_id("replayed")).to_have_text("replayed answer")
    expect(attempts.nth(1)).to_contain_text("request id")
    expect(page.get_by_test_id("status")).to_have_text("Rented, nodes starting")
    shot(page, "replayed")


def test_an_operator_reconciles_an_unknown_rental_and_confirms_it_rented(
    simulator: Simulator, order, olga, log_in, page: Page, shot: Shot
) -> None:
    # The order rents upstream but the answer is lost; every repeat of the key is then 409 outcome-unknown.
    simulator.faults([{"fault": "outcome_unknown", "next": 1, "commit": True}])
    rental = order("reconcile-me")
    rental = attempt_again(rental)
    assert rental.status == RentalStatus.UNKNOWN
    assert len(simulator.ledger()) == 1

    page.on("dialog", lambda dialog: dialog.accept())  # the inline forms ask "are you sure?" (hx-confirm)
    ops_log_in(page, log_in, "olga")
    page.goto(f"/ops/rentals/{rental.public_id}/")
    expect(page.get_by_test_id("status")).to_have_text("Outcome unknown")
    expect(page.get_by_test_id("action-confirm")).to_have_count(0)  # reconcile first

    reconcile = page.get_by_test_id("action-reconcile")
    reconcile.get_by_label("Reason").fill("customer asks whether the cluster exists")
    reconcile.get_by_role("checkbox").check()
    reconcile.get_by_role("button", name="Reconcile").click()

    finding = page.get_by_test_id("finding")
    expect(finding).to_contain_text("Found cluster")
    cluster_id = RentalEvent.objects.get(rental=rental, kind="reconcile").data["cluster_ids"][0]
    expect(finding).to_contain_text(cluster_id)
    expect(page.get_by_test_id("timeline")).to_contain_text("customer asks whether the cluster exists")
    shot(page, "finding")

    confirm = page.get_by_test_id("action-confirm")
    confirm.get_by_label(f"Rented as cluster {cluster_id}").check()
    confirm.get_by_label("Reason").fill("found in Lium's pod list")
    confirm.get_by_role("checkbox").check()
    confirm.get_by_role("button", name="Confirm reconciliation").click()

    expect(page.get_by_test_id("status")).to_have_text("Rented, nodes starting")
    expect(page.get_by_text("Settled.")).to_be_visible()
    expect(page.locator("dl.facts").first).to_contain_text(cluster_id)
    expect(page.get_by_test_id("timeline")).to_contain_text("found in Lium's pod list")
    shot(page, "settled")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RENTED and rental.cluster_id == cluster_id


def test_support_is_refused_on_every_action(
    simulator: Simulator, order, sam, log_in, page: Page, shot: Shot, browser_problems
) -> None:
    rental = order("support-cannot-touch")
    assert rental.status == RentalStatus.RENTED
    timeline_url = f"/ops/rentals/{rental.public_id}/"
    # Chromium logs each 403 navigation as a console error; accept exactly those, on the action URLs.
    browser_problems.allow(rf"status of 403 \(Forbidden\).*'url': '[^']*{timeline_url}({'|'.join(ACTIONS)})/'")

    ops_log_in(page, log_in, "sam")
    page.goto(timeline_url)
    expect(page.get_by_test_id("status")).to_have_text("Rented, nodes starting")
    expect(page.get_by_test_id("actions")).to_have_count(0)
    expect(page.locator("form.action")).to_have_count(0)
    for action in ACTIONS:
        expect(page.locator(f"a[href*='/{action}/'], form[action*='/{action}/']")).to_have_count(0)
    shot(page, "timeline-no-actions")

    for action in ACTIONS:
        response = page.goto(f"{timeline_url}{action}/")
        assert response is not None and response.status == 403, action
        expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("Support can look but not change rentals")
    shot(page, "refused")
    rental.refresh_from_db()
    assert rental.status == RentalStatus.RENTED
