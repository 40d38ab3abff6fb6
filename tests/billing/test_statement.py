"""Our cost against Lium's statement: agreeing days confirm usage lines; a disagreeing day is listed, alerted once."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError

from api.keys import api_key_create
from billing.models import OperatorNotice, StatementLine
from billing.statement import statements_compare_all
from billing.tasks import statement_check
from billing.usage import Month, usage_report
from rentals import upstream
from rentals.models import ClusterMember, Rental, RentalEvent
from tests.billing.conftest import JUNE_1, terminate

JUNE_2, JUNE_3 = JUNE_1 + timedelta(days=1), JUNE_1 + timedelta(days=2)


@pytest.fixture
def lium_statement(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every credential's `GET /billing/statement` answers `pods` (pod id -> {day: [amounts]}); `asked` records."""
    state: dict[str, Any] = {"pods": {}, "asked": [], "status": 200}
    real_client_for = upstream.client_for

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/billing/statement")
        params = dict(request.url.params)
        state["asked"].append(params)
        if state["status"] != 200:
            return httpx.Response(state["status"], json={"error": {"code": "down", "message": "maintenance"}})
        pods = [
            {
                "pod_id": pod_id,
                "pod_name": "job",
                "total": sum(amount for amounts in days.values() for amount in amounts),
                "days": [{"day": day, "amount": amount} for day, amounts in sorted(days.items()) for amount in amounts],
            }
            for pod_id, days in state["pods"].items()
        ]
        total = sum(pod["total"] for pod in pods)
        body = {"start_day": params["start_day"], "end_day": params["end_day"], "total": total, "pods": pods}
        return httpx.Response(200, json=body)

    def client_for(credential, *, http=None):  # type: ignore[no-untyped-def]
        return real_client_for(credential, http=http or httpx.Client(transport=httpx.MockTransport(handle)))

    monkeypatch.setattr(upstream, "client_for", client_for)
    return state


@pytest.fixture
def ran_30_hours(acme, make_ready_rental, june_clock) -> Rental:  # type: ignore[no-untyped-def]
    """A $10/h cluster of two $5/h pods, RUNNING from 1 June 00:00 to 2 June 06:00 UTC; now is 3 June 00:20."""
    rental = make_ready_rental(acme, price="10.00", pod_name="train")
    for rank in (0, 1):
        ClusterMember.objects.create(
            rental=rental, pod_id=f"pod-{rank}", rank=rank, status="RUNNING", price_per_hour=Decimal(5), gpu_count=8
        )
    ClusterMember.objects.filter(rental=rental).update(running_since=JUNE_1)
    june_clock.now = JUNE_2 + timedelta(hours=6)
    terminate(rental)
    june_clock.now = JUNE_3 + timedelta(minutes=20)
    return rental


def lium_agrees(state: dict[str, Any]) -> None:
    """Lium debited each pod 24 h on 1 June and 6 h on 2 June, the second day in two ledger rows."""
    for pod_id in ("pod-0", "pod-1"):
        state["pods"][pod_id] = {"2030-06-01": [120.0], "2030-06-02": [20.0, 10.0]}


def usage_api_line(client, user) -> dict:  # type: ignore[no-untyped-def]
    _key, raw = api_key_create(user=user, name="usage", scopes=["read"])
    response = client.get("/api/v1/usage?month=2030-06", headers={"X-API-Key": raw})
    assert response.status_code == 200, response.content
    [line] = response.json()["lines"]
    return line


def test_days_that_agree_to_the_cent_confirm_the_usage_line_on_page_csv_and_api(
    client_for, alice, ran_30_hours, lium_statement
) -> None:
    lium_agrees(lium_statement)
    lium_statement["pods"]["pod-1"]["2030-06-02"] = [20.0, 10.009]  # within a cent
    client = client_for(alice)
    assert usage_api_line(client, alice)["confirmed"] is False  # not checked yet: our estimate

    statement_check()

    assert lium_statement["asked"] == [{"start_day": "2030-06-01", "end_day": "2030-06-02"}]
    assert StatementLine.objects.count() == 4 and not StatementLine.objects.filter(agrees=False).exists()
    line = usage_api_line(client, alice)
    assert line["confirmed"] is True and line["estimate"] is False and line["cost_usd"] == "300.00"
    rows = list(csv.DictReader(io.StringIO(client.get("/usage.csv?month=2030-06").content.decode())))
    assert rows[0]["confirmed"] == "yes" and rows[0]["cost_usd"] == "300.00"
    assert 'data-testid="confirmed"' in client.get("/usage/?month=2030-06").content.decode()
    assert OperatorNotice.objects.count() == 0 and mail.outbox == []


def test_a_day_that_disagrees_is_listed_with_both_figures_and_alerts_operators_once(
    client_for, alice, olga, ran_30_hours, lium_statement
) -> None:
    lium_agrees(lium_statement)
    for pod_id in ("pod-0", "pod-1"):
        lium_statement["pods"][pod_id]["2030-06-02"].append(1.5)  # a skew on 2 June

    statement_check()
    statement_check()  # the next run finds the same day: no second alert

    disagreeing = StatementLine.objects.filter(agrees=False).order_by("pod_id")
    assert [(line.pod_id, str(line.day), line.ours_usd, line.lium_usd) for line in disagreeing] == [
        ("pod-0", "2030-06-02", Decimal("30.0000"), Decimal("31.5000")),
        ("pod-1", "2030-06-02", Decimal("30.0000"), Decimal("31.5000")),
    ]
    [notice] = OperatorNotice.objects.all()
    assert notice.kind == "statement.mismatch" and "2030-06-02" in notice.subject
    assert [message.to for message in mail.outbox] == [[olga.email]]
    assert "$63.00" in mail.outbox[0].body and "$60.00" in mail.outbox[0].body
    assert usage_api_line(client_for(alice), alice)["confirmed"] is False

    page = client_for(olga).get("/ops/").content.decode()
    assert 'data-testid="statement-disagreements"' in page and 'data-kind="statement.mismatch"' in page
    assert page.count('data-pod="pod-') == 2 and "31.50" in page and "30.00" in page


def test_a_day_that_agrees_again_closes_its_notice(ran_30_hours, lium_statement) -> None:
    lium_agrees(lium_statement)
    lium_statement["pods"]["pod-0"]["2030-06-02"] = [40.0]
    statements_compare_all()
    assert OperatorNotice.objects.filter(resolved_at__isnull=True).count() == 1
    lium_agrees(lium_statement)  # Lium corrected its ledger
    statements_compare_all()
    assert OperatorNotice.objects.filter(resolved_at__isnull=True).count() == 0


def test_a_pod_we_billed_that_the_statement_lacks_disagrees(ran_30_hours, lium_statement) -> None:
    lium_agrees(lium_statement)
    del lium_statement["pods"]["pod-1"]
    lium_statement["pods"]["someone-elses-pod"] = {"2030-06-01": [99.0]}  # not ours: left out

    statements_compare_all()

    assert set(StatementLine.objects.filter(agrees=False).values_list("pod_id", "lium_usd")) == {("pod-1", None)}
    assert not StatementLine.objects.filter(pod_id="someone-elses-pod").exists()


def test_an_unreadable_statement_changes_nothing(ran_30_hours, lium_statement) -> None:
    lium_statement["status"] = 503
    [result] = statements_compare_all()
    assert "503" in result.error and StatementLine.objects.count() == 0 and OperatorNotice.objects.count() == 0


def test_a_pod_bills_from_running_until_its_delete_was_accepted(acme, make_ready_rental, june_clock) -> None:
    rental = make_ready_rental(acme, price="10.00")
    ClusterMember.objects.create(
        rental=rental, pod_id="p", running_since=JUNE_1 + timedelta(minutes=30), price_per_hour=10
    )
    june_clock.now = JUNE_1 + timedelta(hours=2, minutes=30)
    RentalEvent.objects.create(rental=rental, kind=RentalEvent.Kind.MEMBER, data={"delete_accepted": True})
    june_clock.now = JUNE_1 + timedelta(hours=3)
    terminate(rental)  # members gone from two listings: half an hour after the delete

    [line] = usage_report(rentals=Rental.objects.all(), month=Month(2030, 6)).lines
    # 2 h of the pod's own $10/h: from RUNNING (not rented) until the accepted delete (not terminated).
    assert line.cost_usd == Decimal("20.00") and line.ended == JUNE_1 + timedelta(hours=2, minutes=30)
    assert line.started == JUNE_1 + timedelta(minutes=30) and not line.estimate


def test_the_command_checks_one_past_day_and_refuses_bad_input(ran_30_hours, lium_statement) -> None:
    lium_agrees(lium_statement)
    out = io.StringIO()
    call_command("statement_check", "--day", "2030-06-01", stdout=out)
    assert lium_statement["asked"] == [{"start_day": "2030-06-01", "end_day": "2030-06-01"}]
    assert "2 pod-days compared, 0 disagree" in out.getvalue()
    for bad in (["--day", "June"], ["--day", "2030-06-04"], ["--days", "0"]):
        with pytest.raises(CommandError):
            call_command("statement_check", *bad, stdout=io.StringIO())
    call_command("statement_check", "--day", "today", stdout=out)
    assert lium_statement["asked"][-1] == {"start_day": "2030-06-03", "end_day": "2030-06-03"}


def test_beat_runs_the_check_daily_on_the_housekeeping_queue(settings) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["billing-statement"]
    assert entry["task"] == "billing.tasks.statement_check"
    assert settings.CELERY_TASK_ROUTES["billing.tasks.statement_check"] == {"queue": "housekeeping"}
    assert (entry["schedule"].hour, entry["schedule"].minute) == ({0}, {20})  # daily, 00:20 UTC


def test_a_skewed_day_unconfirms_only_the_lines_of_that_day(
    client_for, alice, acme, make_ready_rental, june_clock, lium_statement
) -> None:
    def rental_running(pod_id: str, start, hours: int) -> Rental:  # type: ignore[no-untyped-def]
        june_clock.now = start
        rental = make_ready_rental(acme, price="2.00", pod_name=pod_id)
        ClusterMember.objects.create(rental=rental, pod_id=pod_id, running_since=start, price_per_hour=Decimal(2))
        june_clock.now = start + timedelta(hours=hours)
        terminate(rental)
        return rental

    first = rental_running("first", JUNE_1 + timedelta(hours=1), 3)  # 1 June only
    second = rental_running("second", JUNE_2 + timedelta(hours=1), 5)  # 2 June only
    lium_statement["pods"] = {"first": {"2030-06-01": [6.0]}, "second": {"2030-06-02": [10.0, 1.5]}}  # skewed
    june_clock.now = JUNE_3 + timedelta(minutes=20)

    statement_check()

    _key, raw = api_key_create(user=alice, name="usage", scopes=["read"])
    lines = client_for(alice).get("/api/v1/usage?month=2030-06", headers={"X-API-Key": raw}).json()["lines"]
    assert {line["id"]: line["confirmed"] for line in lines} == {
        str(first.public_id): True,
        str(second.public_id): False,
    }
    assert OperatorNotice.objects.get().key.endswith(":2030-06-02")
