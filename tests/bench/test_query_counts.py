"""Page query counts do not grow with the number of rows: a few rows and many rows cost the same queries.

The bench (`make bench`) measures the same pages at 10,000 and 100,000 rentals; these tests keep the
property from regressing on every `make test`.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from rentals import offers
from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt
from rentals.upstream.parse_offers import offer_parse
from tests.conftest import SSH_KEY
from tests.matching import must_search

pytestmark = pytest.mark.django_db

FEW, MANY = 3, 80
STATUSES = ["terminated", "ready", "rented", "refused", "unknown", "degraded", "retrying", "queued", "sending"]


def make_rentals(count: int, *, customer, user) -> None:  # type: ignore[no-untyped-def]
    """Bulk-create `count` rentals in every state, with nodes, members and an attempt each."""
    now = timezone.now()
    body = b'{"pod_name":"x"}'
    rentals = Rental.objects.bulk_create(
        Rental(
            created_by=user,
            customer=customer,
            credential=customer.default_credential,
            fabric_id=f"fabric-{n % 4}",
            executor_ids=[f"node-{n}-a", f"node-{n}-b"],
            pod_name=f"job-{n}",
            customer_ref="acme",
            idempotency_key=uuid.uuid4(),
            request_body=body,
            body_sha256=hashlib.sha256(body).hexdigest(),
            status=STATUSES[n % len(STATUSES)],
            attempt_count=1,
            first_sent_at=now - timedelta(hours=1),
            lease_until=now - timedelta(minutes=1),
            cluster_id=f"cluster-{uuid.uuid4()}",  # a cluster belongs to one rental, across calls too
        )
        for n in range(count)
    )
    # Old enough to show in the attention queue.
    Rental.objects.filter(pk__in=[r.pk for r in rentals]).update(updated_at=now - timedelta(hours=1))
    RentalNode.objects.bulk_create(
        RentalNode(rental=rental, executor_id=node) for rental in rentals for node in rental.executor_ids
    )
    ClusterMember.objects.bulk_create(
        ClusterMember(rental=rental, pod_id=f"pod-{rental.pk}-{rank}", rank=rank, status="RUNNING")
        for rental in rentals
        for rank in range(2)
    )
    RentAttempt.objects.bulk_create(
        RentAttempt(
            rental=rental,
            number=1,
            started_at=now - timedelta(minutes=30),
            duration_ms=40,
            http_status=200,
            classification="confirmed",
            request_id=f"req_{rental.pk}",
        )
        for rental in rentals
    )


def queries_for(client, url: str, status: int = 200) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == status, url
    return len(captured)


def listing(fabrics: int, nodes_per_fabric: int) -> offers.OfferListing:
    """A fabric listing as the upstream sends it, parsed by the dashboard's own parser."""
    rows = [
        {
            "fabric_id": f"hot:infiniband:0x{f:x}:0x7fff:NVIDIA H100 80GB HBM3:8",
            "fabric_type": "infiniband",
            "link_rate": "400 Gb/sec (4X NDR)",
            "fabric_measured": True,
            "node_count": nodes_per_fabric,
            "nodes": [
                {
                    "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"node:{f}:{n}")),
                    "machine_name": "NVIDIA H100 80GB HBM3",
                    "gpu_count": 8,
                    "available_gpu_count": 8,
                    "price_per_gpu": "2.10",
                    "location": {"city": "Oslo", "country": "Norway", "country_code": "NO"},
                    "reliability_score": 0.99,
                    "executor_ip_address": f"198.18.{f}.{n}",
                }
                for n in range(nodes_per_fabric)
            ],
        }
        for f in range(fabrics)
    ]
    parsed = [fabric for row in rows if (fabric := offer_parse(row)) is not None]
    assert len(parsed) == len(rows), "every row the bench builds is one the parser keeps"
    return offers.OfferListing(fabrics=parsed, fetched_at=time.time())


def test_my_rentals_list_costs_the_same_queries_for_few_and_many(
    alice, acme, client_for, django_assert_max_num_queries
) -> None:
    client = client_for(alice)
    make_rentals(FEW, customer=acme, user=alice)
    few = queries_for(client, "/rentals/")
    make_rentals(MANY, customer=acme, user=alice)
    with django_assert_max_num_queries(few):
        client.get("/rentals/")
    older = must_search(r'href="\?before=([^&"]+)', client.get("/rentals/").content.decode()).group(1)
    assert queries_for(client, f"/rentals/?before={older}") <= few, "a later page costs no more"
    assert queries_for(client, "/rentals/?status=terminated") <= few


def test_fabric_list_costs_the_same_queries_for_few_and_many_fabrics(
    alice, acme, client_for, monkeypatch: pytest.MonkeyPatch, django_assert_max_num_queries
) -> None:
    client = client_for(alice)
    monkeypatch.setattr(offers, "offers_get", lambda **kwargs: listing(2, 2))
    few = queries_for(client, "/fabrics/")
    monkeypatch.setattr(offers, "offers_get", lambda **kwargs: listing(64, 32))
    with django_assert_max_num_queries(few):
        response = client.get("/fabrics/")
    assert response.status_code == 200
    assert response.content.count(b"hot:infiniband:0x3f:") >= 1, "all 64 fabrics are listed"


def test_ops_overview_costs_the_same_queries_for_few_and_many(
    sam, alice, acme, client_for, django_assert_max_num_queries
) -> None:
    pytest.importorskip("ops")
    from django.urls import NoReverseMatch, reverse

    try:
        url = reverse("ops:overview")
    except NoReverseMatch:
        pytest.skip("the operations overview is not routed yet")
    client = client_for(sam)
    make_rentals(FEW, customer=acme, user=alice)
    few = queries_for(client, url)
    make_rentals(MANY, customer=acme, user=alice)
    with django_assert_max_num_queries(few):
        client.get(url)


def test_progress_fragment_costs_the_same_queries_with_few_and_many_members(
    alice, acme, client_for, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rentals.orders.order import RentOrder
    from rentals.services import rental_submit

    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    client = client_for(alice)

    def rental_with(members: int) -> Rental:
        order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name="job", public_keys=[SSH_KEY])
        rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
        ClusterMember.objects.bulk_create(
            ClusterMember(rental=rental, pod_id=f"pod-{rental.pk}-{rank}", rank=rank, status="RUNNING")
            for rank in range(members)
        )
        return rental

    few = rental_with(2)
    many = rental_with(32)
    url = "/rentals/{}/progress/"
    assert queries_for(client, url.format(many.public_id)) <= queries_for(client, url.format(few.public_id))
    unchanged = queries_for(client, url.format(many.public_id) + f"?v={many.version}", status=204)
    assert unchanged <= queries_for(client, url.format(many.public_id)), "the not-modified answer reads less"


def make_rented(count: int, *, customer, user, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    """Bulk-create `count` rentals Lium confirmed 11 minutes ago: odd ones with two members, even ones with none."""
    make_rentals(count, customer=customer, user=user)
    fresh = list(Rental.objects.order_by("-pk")[:count])
    Rental.objects.filter(pk__in=[r.pk for r in fresh]).update(
        status="rented", rented_at=timezone.now() - timedelta(minutes=11), cluster_id=""
    )
    ClusterMember.objects.filter(rental__in=[r for n, r in enumerate(fresh, start) if n % 2 == 0]).delete()


def test_api_rental_list_costs_the_same_queries_for_one_and_many_rented(
    alice, acme, settings, django_assert_max_num_queries
) -> None:
    from django.test import Client

    from api.keys import api_key_create

    settings.RENT_MEMBERS_GRACE_SECONDS = 600
    _key, secret = api_key_create(user=alice, name="k", scopes=["read"])
    client = Client(headers={"X-API-Key": secret})
    make_rented(1, customer=acme, user=alice)
    one = queries_for(client, "/api/v1/rentals")
    make_rented(12, customer=acme, user=alice, start=1)
    with django_assert_max_num_queries(one):
        response = client.get("/api/v1/rentals")
    items = response.json()["items"]
    assert len(items) == 13 and {item["status"] for item in items} == {"rented"}
    overdue = [item for item in items if "no node has appeared" in item["explanation"]]
    assert len(overdue) == 7, "the rule still holds: the rentals without members are overdue, the others not"
    assert all(not item["members"] for item in overdue)
