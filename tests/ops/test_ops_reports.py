"""Usage per customer ref (table, chart, CSV), the audit log, and query counts that do not grow with rows."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from ops import overview, selectors
from rentals.models import ClusterMember, Heartbeat, RentalEvent, RentAttempt

pytestmark = pytest.mark.django_db


@pytest.fixture
def usage(make_rental, globex):  # type: ignore[no-untyped-def]
    """Acme: 2 nodes running for 3 h at $2/h each. Globex: 1 node that ran 2 h at $1.50/h, then was gone."""
    now = timezone.now()
    acme_rental = make_rental(status="ready")
    for rank in range(2):
        ClusterMember.objects.create(
            rental=acme_rental,
            pod_id=f"a{rank}",
            rank=rank,
            price_per_hour=Decimal(2),
            running_since=now - timedelta(hours=3),
        )
    globex_rental = make_rental(customer=globex, status="terminated")
    ClusterMember.objects.create(
        rental=globex_rental,
        pod_id="g0",
        rank=0,
        price_per_hour=Decimal("1.5"),
        running_since=now - timedelta(hours=4),
        gone_at=now - timedelta(hours=2),
    )
    return now


def test_usage_counts_node_hours_and_cost_per_customer_ref(usage) -> None:
    today = timezone.localdate(usage)
    rows = selectors.usage_by_customer_ref(start=today - timedelta(days=2), end=today, now=usage)
    assert [(r.customer_ref, r.rentals, r.node_hours, r.cost, r.bar) for r in rows] == [
        ("acme", 1, Decimal("6.00"), Decimal("12.00"), 100),
        ("globex", 1, Decimal("2.00"), Decimal("3.00"), 25),
    ]


def test_usage_is_clipped_to_the_period(usage) -> None:
    long_ago = timezone.localdate(usage) - timedelta(days=30)
    assert selectors.usage_by_customer_ref(start=long_ago, end=long_ago + timedelta(days=1), now=usage) == []


def test_usage_page_has_a_server_side_svg_chart_and_a_csv(usage, sam, client_for) -> None:
    client = client_for(sam)
    html = client.get("/ops/usage/").content.decode()
    assert '<svg role="img"' in html and 'width="100%"' in html and "$12.00" in html
    response = client.get("/ops/usage.csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["customer_ref"], r["rentals"], r["node_hours"], r["estimated_cost_usd"]) for r in rows] == [
        ("acme", "1", "6.00", "12.00"),
        ("globex", "1", "2.00", "3.00"),
    ]


def test_the_audit_log_filters_by_user_kind_and_date(make_rental, sam, olga, client_for) -> None:
    rental = make_rental()
    RentalEvent.objects.create(rental=rental, kind="support_view", actor=sam, message="Viewed by sam.")
    RentalEvent.objects.create(rental=rental, kind="staff_action", actor=olga, message="Cancel. customer asked")
    old = RentalEvent.objects.create(rental=rental, kind="staff_action", actor=olga, message="Terminate. long ago")
    RentalEvent.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=10))
    RentalEvent.objects.create(rental=rental, kind="state", message="not audited")
    client = client_for(sam)

    def shown(**query: str) -> list[str]:
        html = client.get("/ops/audit/", query).content.decode()
        return [m for m in ("Viewed by sam.", "customer asked", "long ago", "not audited") if m in html]

    assert shown() == ["Viewed by sam.", "customer asked", "long ago"]
    assert shown(user="olga") == ["customer asked", "long ago"]
    assert shown(kind="support_view") == ["Viewed by sam."]
    assert shown(since=str(timezone.localdate() - timedelta(days=1))) == ["Viewed by sam.", "customer asked"]
    assert shown(until=str(timezone.localdate() - timedelta(days=5))) == ["long ago"]
    assert shown(user="nobody") == []


def test_the_audit_log_lists_supports_reads_of_customer_data_beside_and_filters_them(
    make_rental, acme, sam, olga, client_for
) -> None:
    rental = make_rental()
    RentalEvent.objects.create(rental=rental, kind="support_view", actor=sam, message="Viewed by sam.")
    client_for(sam).get(f"/customers/{acme.pk}/team/")
    client = client_for(olga)

    def shown(**query: str) -> list[str]:
        html = client.get("/ops/audit/", query).content.decode()
        reads = html.split('data-testid="support-reads"')[1]
        return [m for m in ("Viewed by sam.",) if m in html] + [
            f"{who} read {what} of {customer}"
            for who, customer, what in re.findall(r"<td>(\w+)</td>\s*<td>([^<]+)</td>\s*<td>([^<]+)</td>", reads)
        ]

    assert shown() == ["Viewed by sam.", "sam read team page of Acme Research"]
    assert shown(kind="support_read") == ["sam read team page of Acme Research"]
    assert shown(kind="support_view") == ["Viewed by sam."]
    assert shown(user="olga") == []
    assert shown(until=str(timezone.localdate() - timedelta(days=1))) == []


@pytest.fixture
def many_rows(make_rental, globex, olga):  # type: ignore[no-untyped-def]
    """60 rentals in every troubled state, with members, attempts and staff events."""
    now = timezone.now()
    states = ["unknown", "degraded", "retrying", "sending", "queued", "ready"]
    for index in range(60):
        rental = make_rental(
            customer=globex if index % 2 else None,
            status=states[index % len(states)],
            first_sent_at=now - timedelta(hours=1),
            lease_until=now - timedelta(minutes=5),
            cluster_id=f"cl-many-{index}",
        )
        ClusterMember.objects.create(
            rental=rental,
            pod_id=f"pod-many-{index}",
            overlay_ip=f"10.0.0.{index}",
            executor_id=f"exec-many-{index}",
            running_since=now - timedelta(hours=1),
        )
        RentAttempt.objects.create(
            rental=rental,
            number=1,
            started_at=now - timedelta(minutes=index),
            duration_ms=10,
            http_status=429 if index % 3 else 200,
            classification="inconclusive" if index % 3 else "confirmed",
            request_id=f"req-many-{index}",
        )
        RentalEvent.objects.create(rental=rental, kind="staff_action", actor=olga, message="Nudged. test")
    Heartbeat.objects.create(name="sweeper", at=now)


def test_the_overview_runs_a_fixed_number_of_queries(many_rows, sam, client_for, django_assert_max_num_queries) -> None:
    client = client_for(sam)
    # The same at any size: session and user (3), the figures (counts 2, attention 1, upstream 2, the sweeper
    # 1, the estimates' error 1), the charts (2: outcomes per hour, times to ready), the runway panel (2), the
    # statement panel (3: open notices, disagreeing pod-days, the last check).
    with django_assert_max_num_queries(17):
        html = client.get("/ops/").content.decode()
    assert 'data-testid="attention"' in html and "Stuck lease" in html and "Retrying for more than" in html
    assert "Queued for more than" not in html, "queued rentals are not stuck yet"
    with django_assert_max_num_queries(3):  # the session and user: the figures come from the cache
        panel = client.get("/ops/panel/", headers={"HX-Request": "true"}).content.decode()
    assert panel.startswith('\n<div id="ops-panel"') or panel.lstrip().startswith('<div id="ops-panel"')
    assert "<html" not in panel and 'hx-trigger="load delay:15s"' in panel


def test_the_overview_reports_upstream_and_worker_health(many_rows, sam, client_for) -> None:
    health = overview.upstream_health(now=timezone.now())
    [main] = health
    assert main["hour_total"] == 60 and main["hour_429"] == 40 and main["error_rate"] == 67
    assert main["last_2xx"] is not None
    worker = overview.worker_health(now=timezone.now())
    assert not worker["sweeper_stale"]
    html = client_for(sam).get("/ops/").content.decode()
    assert "40 / 40" in html
    if worker["broker_redis"]:
        assert isinstance(worker["queue_depth"], int) and " waiting" in html
    else:
        assert worker["queue_depth"] is None and "n/a (the broker is not Redis)" in html


def test_search_and_timeline_run_a_fixed_number_of_queries(
    many_rows, sam, client_for, django_assert_max_num_queries
) -> None:
    client = client_for(sam)
    with django_assert_max_num_queries(20):
        html = client.get("/ops/search/", {"q": "Globex"}).content.decode()
    assert html.count("/ops/rentals/") >= 30
    with django_assert_max_num_queries(20):
        assert client.get("/ops/search/", {"q": "pod-many-7"}).status_code == 302
    with django_assert_max_num_queries(12):
        client.get("/ops/audit/")
