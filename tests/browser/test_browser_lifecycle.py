"""A cluster's lifecycle in a real browser: the removal countdown, extended and cancelled; the connect panel
and its downloads; a webhook endpoint's delivery log. Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.utils import timezone

from notifications.services import endpoint_create
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY
from tests.site.test_url_permissions import add_members

try:
    from playwright.sync_api import Page, expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("browser tests need the playwright package (uv sync installs the dev group)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Shot = Callable[[Page, str], Path]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, acme, alice) -> Rental:  # type: ignore[no-untyped-def]
    """Acme's ready two-node cluster with SSH, overlay IPs and Jupyter (no worker: pushes are not sent)."""
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *args, **kwargs: None)
    order = RentOrder(fabric_id="fab", executor_ids=["n-a", "n-b"], pod_name="train-70b", public_keys=[SSH_KEY])
    rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="cl-1", gpus_per_node=8)
    add_members(rental)
    return rental


def test_a_member_schedules_extends_and_cancels_the_removal(page: Page, log_in, cluster, shot: Shot) -> None:  # type: ignore[no-untyped-def]
    log_in("alice")
    page.goto(f"/rentals/{cluster.public_id}/")
    expect(page.get_by_test_id("removal-none")).to_be_visible()
    page.get_by_label("Remove automatically in").fill("3")
    page.get_by_role("button", name="Schedule removal").click()
    countdown = page.get_by_test_id("countdown")
    expect(countdown).to_have_text("2 h 59 min")
    expect(page.get_by_test_id("removal-at")).to_contain_text("UTC")
    shot(page, "scheduled")

    page.get_by_role("button", name="+4 h").click()
    expect(page.get_by_test_id("countdown")).to_have_text("6 h 59 min")
    cluster.refresh_from_db()
    assert cluster.removal_scheduled_at is not None
    assert timedelta(hours=6, minutes=58) < cluster.removal_scheduled_at - timezone.now() <= timedelta(hours=7)
    expect(page.locator(".banner.success")).to_contain_text("Every member will be removed at")

    # The script keeps the countdown right while the page stays open: move the time, let it tick.
    page.evaluate(
        """() => {
            const element = document.querySelector("[data-countdown]");
            element.dataset.countdown = new Date(Date.now() + (90 * 60 + 30) * 1000).toISOString();
            document.dispatchEvent(new Event("htmx:afterSettle"));
        }"""
    )
    expect(page.get_by_test_id("countdown")).to_have_text("1 h 30 min")
    shot(page, "extended")

    page.get_by_role("button", name="Cancel scheduled removal").click()
    expect(page.get_by_test_id("removal-none")).to_be_visible()
    expect(page.locator(".banner.success")).to_contain_text("Scheduled removal cancelled")
    cluster.refresh_from_db()
    assert cluster.removal_scheduled_at is None
    shot(page, "cancelled")

    page.goto("/rentals/")
    expect(page.get_by_text("removes in")).to_have_count(0)


def test_the_list_counts_down_too(page: Page, log_in, cluster, shot: Shot) -> None:  # type: ignore[no-untyped-def]
    Rental.objects.filter(pk=cluster.pk).update(removal_scheduled_at=timezone.now() + timedelta(hours=26, minutes=5))
    log_in("alice")
    page.goto("/rentals/")
    expect(page.get_by_text("removes in")).to_contain_text("1 d 2 h")
    shot(page, "list")


def test_the_connect_panel_links_jupyter_and_downloads_ssh_config_and_env(
    page: Page, log_in, cluster, shot: Shot
) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 760, "height": 900})
    log_in("alice")
    page.goto(f"/rentals/{cluster.public_id}/")
    links = page.get_by_test_id("jupyter-link")
    expect(links).to_have_count(2)
    expect(links.first).to_have_attribute("href", "http://192.0.2.1:38888/lab?token=t0")
    expect(links.first).to_have_attribute("rel", "noopener noreferrer")
    expect(page.get_by_test_id("access")).to_contain_text("8888 → 38888")

    # The long torchrun line wraps inside its box instead of being cut off.
    torchrun = page.get_by_test_id("torchrun")
    assert torchrun.evaluate("element => getComputedStyle(element).whiteSpace") == "pre-wrap"
    assert torchrun.evaluate("element => element.scrollWidth <= element.clientWidth")
    expect(page.get_by_test_id("interconnect-check")).to_contain_text("bus bandwidth")
    page.get_by_test_id("connect").scroll_into_view_if_needed()
    shot(page, "connect")

    with page.expect_download() as download:
        page.get_by_test_id("ssh-config").click()
    assert download.value.suggested_filename == "train-70b.ssh_config"
    config = Path(download.value.path()).read_text()
    assert "Host train-70b-rank1\n  HostName 192.0.2.2\n  User root\n  Port 22001\n" in config
    with page.expect_download() as download:
        page.get_by_test_id("env-file-1").click()
    assert download.value.suggested_filename == "train-70b-rank1.env"
    assert "NODE_RANK=1\nNNODES=2\n" in Path(download.value.path()).read_text()


@pytest.fixture
def receiver() -> Iterator[dict]:
    """An HTTP receiver on 127.0.0.1 answering with `state["status"]`; it records the webhook ids it got."""
    state: dict = {"status": 200, "ids": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state["ids"].append(self.headers.get("webhook-id"))
            answer = b"thanks" if state["status"] < 400 else b"down for maintenance"
            self.send_response(state["status"])
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/hook"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


def test_the_delivery_log_shows_each_delivery_and_a_redelivery_keeps_its_id(
    page: Page, log_in, receiver, shot: Shot, monkeypatch: pytest.MonkeyPatch, alice, acme
) -> None:  # type: ignore[no-untyped-def]
    from notifications.delivery import delivery_attempt

    # No worker here: a delivery is attempted as soon as it is enqueued (in the live server's thread).
    monkeypatch.setattr(
        "notifications.services.delivery_enqueue",
        lambda delivery_id, countdown=None: delivery_attempt(delivery_id=delivery_id),
    )
    monkeypatch.setattr("notifications.delivery.delivery_enqueue", lambda *args, **kwargs: None)
    from billing.invitations import admin_set

    admin_set(membership=alice.memberships.get(customer=acme), admin=True)  # only admins test and redeliver
    endpoint, _secret = endpoint_create(customer=acme, url=receiver["url"], events=["*"], created_by=alice)
    log_in("alice")
    page.goto(f"/profile/webhooks/{endpoint.pk}/")
    expect(page.locator("#delivery-log")).to_contain_text("Nothing delivered yet")
    page.get_by_role("button", name="Send a test event").click()
    log = page.locator("#delivery-log tbody tr")
    expect(log).to_have_count(1)
    expect(log.first).to_contain_text("webhook.test")
    expect(log.first).to_contain_text("200")
    expect(log.first).to_contain_text("thanks")
    shot(page, "delivered")

    receiver["status"] = 503
    log.first.get_by_role("button", name="Redeliver").click()
    expect(page.locator("#delivery-log tbody tr").first).to_contain_text("503")
    expect(page.locator("#delivery-log tbody tr").first).to_contain_text("down for maintenance")
    assert len(receiver["ids"]) == 2 and receiver["ids"][0] == receiver["ids"][1]
    shot(page, "redelivered")
