"""A `rented` rental whose members never appeared (e.g. a 2xx without pod ids or cluster id) needs attention:
it is listed, its page says why, an operator can reconcile it, and once found it can be terminated."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from rentals import upstream
from rentals.models import ClusterMember, Rental
from rentals.selectors import rental_attention_reason, rental_members_overdue, rented_without_members
from rentals.states import RentalStatus
from tests.rentals.fakes import FakeUpstream

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_upstream(monkeypatch: pytest.MonkeyPatch) -> FakeUpstream:
    fake = FakeUpstream()
    real_client_for = upstream.client_for

    def client_for(credential: Any, *, http: httpx.Client | None = None) -> upstream.LiumClient:
        return real_client_for(credential, http=http or httpx.Client(transport=httpx.MockTransport(fake.handle)))

    monkeypatch.setattr(upstream, "client_for", client_for)
    return fake


@pytest.fixture
def silent(make_rental, settings):  # type: ignore[no-untyped-def]
    """A rental Lium confirmed 11 minutes ago without pod ids or cluster id; no member ever appeared."""
    settings.RENT_MEMBERS_GRACE_SECONDS = 600
    return make_rental(
        status=RentalStatus.RENTED, rented_at=timezone.now() - timedelta(minutes=11), pod_ids=[], cluster_id=""
    )


def act(client, rental, action: str, **data: str):  # type: ignore[no-untyped-def]
    return client.post(f"/ops/rentals/{rental.public_id}/{action}/", {"confirm": "on", **data})


def test_a_rented_rental_without_members_past_the_grace_needs_attention(silent: Rental, make_rental) -> None:
    fresh = make_rental(status=RentalStatus.RENTED, rented_at=timezone.now() - timedelta(minutes=2))
    with_members = make_rental(
        status=RentalStatus.RENTED, rented_at=timezone.now() - timedelta(hours=1), cluster_id="cl-3"
    )
    ClusterMember.objects.create(rental=with_members, pod_id="p-1", status="PENDING")
    now = timezone.now()
    assert "members have not appeared" in rental_attention_reason(rental=silent, now=now)
    assert (
        rental_attention_reason(rental=fresh, now=now) == ""
        and rental_attention_reason(rental=with_members, now=now) == ""
    )


def test_a_list_with_members_prefetched_decides_as_the_rule_does(silent: Rental, make_rental) -> None:
    """Lists read the rule off prefetched members (no query per row); it must agree with the SQL filter."""
    long_ago, lately = timezone.now() - timedelta(minutes=30), timezone.now() - timedelta(minutes=2)
    make_rental(status=RentalStatus.RENTED, rented_at=lately)
    make_rental(status=RentalStatus.READY, rented_at=long_ago)
    never_stamped = make_rental(status=RentalStatus.RENTED)  # no rented_at: the rule goes by updated_at
    stale = make_rental(status=RentalStatus.RENTED)
    Rental.objects.filter(pk=stale.pk).update(updated_at=long_ago)
    ClusterMember.objects.create(
        rental=make_rental(status=RentalStatus.RENTED, rented_at=long_ago), pod_id="p-9", status="PENDING"
    )
    now = timezone.now()
    by_rule = set(Rental.objects.filter(rented_without_members(now=now)).values_list("pk", flat=True))
    assert by_rule == {silent.pk, stale.pk} and never_stamped.pk not in by_rule
    for rental in Rental.objects.prefetch_related("members"):
        assert rental_members_overdue(rental=rental, now=now) == (rental.pk in by_rule), rental.pod_name
        assert rental_members_overdue(rental=Rental.objects.get(pk=rental.pk), now=now) == (rental.pk in by_rule)


def test_the_overview_lists_it_with_the_reason(silent: Rental, make_rental, sam, client_for) -> None:
    make_rental(status=RentalStatus.RENTED, rented_at=timezone.now() - timedelta(minutes=2))
    html = client_for(sam).get("/ops/").content.decode()
    assert silent.pod_name in html and "members have not appeared" in html
    assert 'data-testid="attention-count">1<' in html


def test_its_page_says_why_and_offers_reconcile(silent: Rental, make_rental, olga, client_for) -> None:
    client = client_for(olga)
    page = client.get(f"/ops/rentals/{silent.public_id}/").content.decode()
    assert "members have not appeared" in page and f"/ops/rentals/{silent.public_id}/reconcile/" in page
    fresh = make_rental(status=RentalStatus.RENTED, rented_at=timezone.now() - timedelta(minutes=2))
    assert "/reconcile/" not in client.get(f"/ops/rentals/{fresh.public_id}/").content.decode()


def test_terminate_before_the_cluster_is_known_says_to_reconcile(silent: Rental, olga, client_for) -> None:
    html = act(client_for(olga), silent, "terminate", reason="customer wants it gone").content.decode()
    assert "Reconcile" in html and "wait until its members appear" not in html
    silent.refresh_from_db()
    assert silent.status == RentalStatus.RENTED


def test_reconcile_stores_the_cluster_found_and_terminate_then_works(
    silent: Rental, olga, client_for, fake_upstream: FakeUpstream, enqueued, django_capture_on_commit_callbacks
) -> None:
    fake_upstream.pods = [
        {
            "id": f"pod-{executor}",
            "status": "RUNNING",
            "cluster_id": "cl-7",
            "pod_name": silent.pod_name,
            "executor": {"id": executor},
        }
        for executor in silent.executor_ids
    ]
    client = client_for(olga)
    with django_capture_on_commit_callbacks(execute=True):
        response = act(client, silent, "reconcile", reason="members never showed")
    assert response.status_code == 302
    silent.refresh_from_db()
    assert silent.status == RentalStatus.RENTED and silent.cluster_id == "cl-7"
    assert sorted(silent.pod_ids) == sorted(f"pod-{e}" for e in silent.executor_ids)
    assert silent.last_reconcile_at is not None
    assert ("rentals.tasks.credential_pods_sync", (silent.credential_id,)) in enqueued.messages()
    page = client.get(f"/ops/rentals/{silent.public_id}/").content.decode()
    assert "Reconciliation found the cluster: cl-7" in page

    with django_capture_on_commit_callbacks(execute=True):
        assert act(client, silent, "terminate", reason="customer wants it gone").status_code == 302
    silent.refresh_from_db()
    assert silent.status == RentalStatus.TERMINATING


def test_the_timeline_shows_when_an_unknown_rental_was_last_looked_for(make_rental, sam, client_for) -> None:
    looked = timezone.now().replace(microsecond=0) - timedelta(minutes=3)
    rental = make_rental(status=RentalStatus.UNKNOWN, last_reconcile_at=looked, reconcile_looks=2)
    html = client_for(sam).get(f"/ops/rentals/{rental.public_id}/").content.decode()
    assert 'data-testid="last-look"' in html and looked.strftime("%Y-%m-%d %H:%M:%S") in html


def test_the_admin_reconcile_action_stores_the_cluster_of_a_silent_rental(
    silent: Rental, make_rental, client_for, fake_upstream: FakeUpstream
) -> None:
    from tests.conftest import _user

    fake_upstream.pods = [
        {
            "id": f"pod-{executor}",
            "status": "RUNNING",
            "cluster_id": "cl-8",
            "pod_name": silent.pod_name,
            "executor": {"id": executor},
        }
        for executor in silent.executor_ids
    ]
    fresh = make_rental(
        status=RentalStatus.RENTED, rented_at=timezone.now(), pod_name="fresh-1", executors=["exec-c", "exec-d"]
    )
    response = client_for(_user("root", superuser=True)).post(
        "/admin/rentals/rental/",
        {"action": "reconcile_rentals", "_selected_action": [silent.pk, fresh.pk]},
        follow=True,
    )
    html = response.content.decode()
    assert "Found the cluster" in html and "needs reconciling" in html, "the fresh one is refused, saying why"
    silent.refresh_from_db()
    fresh.refresh_from_db()
    assert (silent.cluster_id, fresh.cluster_id) == ("cl-8", "")
    assert fake_upstream.pod_listings == 1
