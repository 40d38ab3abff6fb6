"""Lium balance runway: balance ÷ the running clusters' hourly cost; shown, exported, alerted once."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.core import mail
from standardwebhooks.webhooks import Webhook

from billing import operator_alerts
from billing.models import BalanceReading, RunwayAlert
from billing.runway import balances_read_all
from rentals import upstream
from tests.billing.conftest import terminate

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def lium_balance(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Every credential's `GET /users/me` answers with this balance (set `balance`, or `fail` to answer 503)."""
    state: dict[str, object] = {"balance": 1000.0, "fail": False, "calls": 0}
    real_client_for = upstream.client_for

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/users/me")
        state["calls"] = int(state["calls"]) + 1  # type: ignore[call-overload]
        if state["fail"]:
            return httpx.Response(503, json={"error": {"code": "down", "message": "maintenance"}})
        return httpx.Response(200, json={"id": "acct-main", "email": "x@y", "name": "x", "balance": state["balance"]})

    def client_for(credential, *, http=None):  # type: ignore[no-untyped-def]
        return real_client_for(credential, http=http or httpx.Client(transport=httpx.MockTransport(handle)))

    monkeypatch.setattr(upstream, "client_for", client_for)
    return state


@pytest.fixture
def operators(olga):  # type: ignore[no-untyped-def]
    """Olga (operator, with an e-mail address) and a second operator; alice is no operator."""
    other = User.objects.create_user("otto", "otto@example.com", "pw")
    other.groups.add(Group.objects.get(name="operator"))
    return [olga, other]


@pytest.fixture
def operator_hook(settings, receiver):  # type: ignore[no-untyped-def]
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    settings.OPERATOR_WEBHOOK_SECRET = SECRET
    settings.RUNWAY_ALERT_HOURS = 24
    return receiver


def test_the_runway_is_the_balance_over_the_running_clusters_cost(
    acme, credential, make_ready_rental, june_clock, lium_balance
) -> None:
    make_ready_rental(acme, price="10.00")
    make_ready_rental(acme, price="15.00")
    lium_balance["balance"] = 1000.0
    balances_read_all()
    reading = BalanceReading.objects.get()
    assert reading.balance_usd == Decimal("1000") and reading.hourly_cost_usd == Decimal("25")
    assert reading.runway_hours == Decimal("40.00")


def test_nothing_running_means_no_end_and_a_failed_read_is_recorded(acme, credential, june_clock, lium_balance) -> None:
    balances_read_all()
    assert BalanceReading.objects.get().runway_hours is None
    lium_balance["fail"] = True
    balances_read_all()
    failed = BalanceReading.objects.order_by("-id").first()
    assert failed is not None and failed.balance_usd is None and failed.error
    assert RunwayAlert.objects.count() == 0


def test_a_low_runway_alerts_operators_once_and_again_only_after_it_recovered(
    acme, alice, credential, make_ready_rental, june_clock, lium_balance, operators, operator_hook
) -> None:
    rental = make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 200.0  # 20 h < 24 h
    balances_read_all()
    operator_alerts.alerts_send()
    lium_balance["balance"] = 150.0  # lower still: the same fall, no new alert
    june_clock.advance(minutes=10)
    balances_read_all()
    operator_alerts.alerts_send()

    assert RunwayAlert.objects.count() == 1
    [request] = operator_hook.requests
    body = json.loads(request.body)
    Webhook(SECRET).verify(request.body, request.headers)  # signed like the customers' webhooks
    assert body["type"] == "runway.low"
    assert body["data"] == {
        "credential": "main",
        "balance_usd": "200.00",
        "hourly_cost_usd": "10.00",
        "runway_hours": "20.00",
        "threshold_hours": 24,
    }
    [email] = mail.outbox
    assert sorted(email.to) == ["olga@example.com", "otto@example.com"]
    assert "20.0 h" in email.subject and "main" in email.subject
    assert "sim-demo-key" not in email.body and "sim-demo-key" not in request.body.decode()

    terminate(rental)  # nothing runs: no end in sight, the alert closes
    balances_read_all()
    assert RunwayAlert.objects.get().resolved_at is not None
    make_ready_rental(acme, price="100.00")
    balances_read_all()  # 150 / 100 = 1.5 h: a new fall, a new alert
    operator_alerts.alerts_send()
    assert RunwayAlert.objects.count() == 2 and len(operator_hook.requests) == 2 and len(mail.outbox) == 2


def test_a_failed_webhook_is_tried_again_by_the_next_check(
    acme, credential, make_ready_rental, june_clock, lium_balance, operators, operator_hook
) -> None:
    operator_hook.answer(500)
    make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 10.0
    balances_read_all()
    operator_alerts.alerts_send()
    assert RunwayAlert.objects.get().webhook_status == "HTTP 500"
    operator_hook.answer(204)
    operator_alerts.alerts_send()
    alert = RunwayAlert.objects.get()
    assert alert.webhook_delivered_at is not None
    assert len(operator_hook.requests) == 2 and len(mail.outbox) == 1  # the e-mail went once


def test_the_ops_overview_and_the_metrics_show_the_runway(
    client_for, sam, acme, credential, make_ready_rental, june_clock, lium_balance
) -> None:
    make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 100.0
    balances_read_all()
    page = client_for(sam).get("/ops/").content.decode()
    assert 'data-testid="runway"' in page and "10.00 h" in page
    metrics = client_for(sam).get("/metrics").content.decode()
    assert 'dashboard_lium_runway_hours{credential="main"} 10.0' in metrics
    assert 'dashboard_lium_balance_usd{credential="main"} 100.0' in metrics


def test_an_unusable_operator_webhook_address_is_recorded_however_long_it_is(
    acme, credential, make_ready_rental, june_clock, lium_balance, operators, settings
) -> None:
    # The reason names the address; a long one must not stop the alert from being recorded (and e-mailed).
    settings.OPERATOR_WEBHOOK_URL = "https://" + "a" * 400 + ".invalid/hook"
    settings.OPERATOR_WEBHOOK_SECRET = SECRET
    settings.RUNWAY_ALERT_HOURS = 24
    make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 10.0
    balances_read_all()
    operator_alerts.alerts_send()
    alert = RunwayAlert.objects.get()
    assert alert.webhook_status.startswith("Not sent:") and alert.webhook_delivered_at is None
    assert len(mail.outbox) == 1


def test_a_refused_operator_webhook_reason_fits_its_column(
    acme, credential, make_ready_rental, june_clock, lium_balance, operators, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long (valid) host name that resolves to a private address: the reason names it, past 300 characters.
    from notifications import addresses

    host = ".".join(["h" * 60] * 4)
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    settings.OPERATOR_WEBHOOK_URL = f"https://{host}/hook"
    settings.OPERATOR_WEBHOOK_SECRET = SECRET
    settings.RUNWAY_ALERT_HOURS = 24
    monkeypatch.setattr(addresses.socket, "getaddrinfo", lambda *args, **kwargs: [(0, 0, 0, "", ("10.0.0.7", 443))])
    make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 10.0
    balances_read_all()
    operator_alerts.alerts_send()
    status = RunwayAlert.objects.get().webhook_status
    assert status.startswith("Not sent: The host hhh") and len(status) <= 300


def test_the_operator_webhook_connects_to_the_address_it_checked(
    acme,
    credential,
    make_ready_rental,
    june_clock,
    lium_balance,
    operators,
    operator_hook,
    settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # DNS rebinding: the name is public when checked and 127.0.0.1 a moment later, when the client connects.
    import socket

    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    port = int(operator_hook.url.rsplit(":", 1)[1].split("/")[0])
    settings.OPERATOR_WEBHOOK_URL = f"http://hooks.example.com:{port}/hook"
    answers = iter(["93.184.216.34"])
    real_getaddrinfo = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == "hooks.example.com":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers, "127.0.0.1"), port))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    connected: list[tuple[str, int]] = []

    def refuse(address, *args, **kwargs):  # type: ignore[no-untyped-def]
        connected.append(address)
        raise ConnectionRefusedError("not in a test")

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(socket, "create_connection", refuse)
    make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 10.0
    balances_read_all()
    operator_alerts.alerts_send()
    assert connected == [("93.184.216.34", port)]
    assert not operator_hook.requests and RunwayAlert.objects.get().webhook_delivered_at is None


def test_the_operator_webhook_refuses_a_6to4_address_like_the_customers(
    acme, credential, make_ready_rental, june_clock, lium_balance, operators, settings
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    settings.OPERATOR_WEBHOOK_URL = "https://[2002:a00:1::1]/hook"  # 10.0.0.1 inside
    settings.OPERATOR_WEBHOOK_SECRET = SECRET
    settings.RUNWAY_ALERT_HOURS = 24
    make_ready_rental(acme, price="10.00")
    lium_balance["balance"] = 10.0
    balances_read_all()
    operator_alerts.alerts_send()
    assert RunwayAlert.objects.get().webhook_status.startswith("Not sent: The host")
