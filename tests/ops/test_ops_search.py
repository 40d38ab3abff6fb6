"""Support finds a rental from whatever a customer gives them; exact ids jump straight to it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ops.search import SEARCH_RESULTS, rental_search
from rentals.models import ClusterMember, Rental, RentAttempt

pytestmark = pytest.mark.django_db


@pytest.fixture
def target(make_rental):  # type: ignore[no-untyped-def]
    """One rented rental with every kind of identifier, among a few others."""
    make_rental(), make_rental()
    rental = make_rental(
        executors=["exec-node-x", "exec-node-y"],
        status="ready",
        cluster_id="cl-7f3a",
        error_request_id="req-err-1",
        pod_name="bert-large-run",
    )
    ClusterMember.objects.create(
        rental=rental, pod_id="pod-111", rank=0, overlay_ip="10.42.0.7", executor_id="exec-member-x"
    )
    RentAttempt.objects.create(
        rental=rental,
        number=1,
        started_at=timezone.now(),
        duration_ms=5,
        classification="confirmed",
        http_status=200,
        request_id="req-attempt-1",
    )
    return rental


def exact_ids(rental) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {
        "rental id": str(rental.public_id),
        "rental id (upper case)": str(rental.public_id).upper(),
        "idempotency key": str(rental.idempotency_key),
        "pod id": "pod-111",
        "cluster id": "cl-7f3a",
        "executor id (requested)": "exec-node-x",
        "executor id (member)": "exec-member-x",
        "overlay IP": "10.42.0.7",
        "request id (rental)": "req-err-1",
        "request id (attempt)": "req-attempt-1",
    }


def test_each_exact_id_redirects_to_the_rental(target, sam, client_for) -> None:
    client = client_for(sam)
    for kind, value in exact_ids(target).items():
        response = client.get("/ops/search/", {"q": f"  {value} "})
        assert response.status_code == 302, kind
        assert response["Location"] == f"/ops/rentals/{target.public_id}/", kind


@pytest.mark.parametrize(
    "query",
    ["bert-large-run", "bert-la", "Acme", "Acme Research", "alice", "alice@example.com", "ALICE@example.com"],
)
def test_names_refs_and_users_list_the_rentals(target, sam, client_for, query: str) -> None:
    response = client_for(sam).get("/ops/search/", {"q": query})
    assert response.status_code == 200
    assert "bert-large-run" in response.content.decode()


def test_customer_ref_finds_that_customers_rentals_only(make_rental, globex, sam, client_for) -> None:
    mine = make_rental(customer=globex)
    make_rental()
    result = rental_search(text="globex")
    assert [r["pk"] for r in result.rentals] == [mine.pk]
    assert "customer ref" in result.matched[mine.pk]
    response = client_for(sam).get("/ops/search/", {"q": "glob"})
    assert mine.pod_name in response.content.decode()


def test_an_executor_shared_by_two_rentals_lists_both_instead_of_jumping(make_rental, sam, client_for) -> None:
    first = make_rental(executors=["exec-shared", "exec-1"])
    second = make_rental(executors=["exec-shared", "exec-2"], created_at=timezone.now() + timedelta(seconds=1))
    response = client_for(sam).get("/ops/search/", {"q": "exec-shared"})
    assert response.status_code == 200
    html = response.content.decode()
    assert first.pod_name in html and second.pod_name in html


def test_nothing_found_says_so(target, sam, client_for) -> None:
    html = client_for(sam).get("/ops/search/", {"q": "no-such-thing"}).content.decode()
    assert "Nothing found" in html


def test_short_text_matches_exactly_not_by_prefix(make_rental) -> None:
    make_rental(pod_name="ab-cluster")
    assert rental_search(text="ab").rentals == []


def test_a_ref_shared_by_many_rentals_shows_the_newest_page_and_says_there_is_more(make_rental) -> None:
    now = timezone.now()
    rentals = [make_rental(customer_ref="team-many") for _ in range(SEARCH_RESULTS + 5)]
    for age, rental in enumerate(rentals):  # the last one created is the newest
        Rental.objects.filter(pk=rental.pk).update(created_at=now - timedelta(minutes=len(rentals) - age))
    result = rental_search(text="team-many")
    assert result.truncated
    newest_first = [rental.pk for rental in reversed(rentals)][:SEARCH_RESULTS]
    assert [row["pk"] for row in result.rentals] == newest_first


def test_a_page_that_fits_is_not_called_truncated(make_rental) -> None:
    for _ in range(3):
        make_rental(customer_ref="team-few")
    result = rental_search(text="team-few")
    assert len(result.rentals) == 3
    assert not result.truncated


def test_like_wildcards_in_the_text_match_themselves(make_rental) -> None:
    # Names the order form refuses (an underscore), as a row could hold from elsewhere: search must still be literal.
    literal, other = make_rental(), make_rental()
    Rental.objects.filter(pk=literal.pk).update(pod_name="a_b-run")
    Rental.objects.filter(pk=other.pk).update(pod_name="axb-run")
    assert [row["pk"] for row in rental_search(text="a_b").rentals] == [literal.pk]
    assert rental_search(text="a%b").rentals == []


def test_a_rental_found_two_ways_is_listed_once_with_both(target, sam, client_for) -> None:
    RentAttempt.objects.filter(rental=target).update(request_id="cl-7f3a")  # the cluster id, as a request id too
    result = rental_search(text="cl-7f3a")
    assert [row["pk"] for row in result.rentals] == [target.pk]
    assert result.matched[target.pk] == ["cluster id", "request id"]


def test_the_search_runs_the_same_few_queries_however_many_rentals_match(
    make_rental, sam, client_for, django_assert_max_num_queries
) -> None:
    for _ in range(SEARCH_RESULTS + 5):
        make_rental(customer_ref="team-q")
    client = client_for(sam)
    client.get("/ops/search/", {"q": "warm-up"})
    # Session, user and role, then customers, users, the one union and the page's rows; then support's audit
    # of the rows (their customers, the reader's memberships, the interval check, one insert).
    with django_assert_max_num_queries(12):
        response = client.get("/ops/search/", {"q": "team-q"})
    assert response.content.decode().count('href="/ops/rentals/') == SEARCH_RESULTS


def test_a_name_prefix_lists_the_newest_rentals_of_every_customer_it_names(make_rental, acme) -> None:
    from accounts.models import Customer

    first = Customer.objects.create(name="Prefixed One", default_credential=acme.default_credential)
    second = Customer.objects.create(name="Prefixed Two", default_credential=acme.default_credential)
    now = timezone.now()
    rentals = [
        make_rental(customer=first),
        make_rental(customer=second),
        make_rental(customer=first),
        make_rental(customer=second),
    ]
    for age, rental in enumerate(rentals):  # the last one created is the newest
        Rental.objects.filter(pk=rental.pk).update(created_at=now - timedelta(minutes=len(rentals) - age))
    result = rental_search(text="Prefixed")
    assert [row["pk"] for row in result.rentals] == [rental.pk for rental in reversed(rentals)]
    assert all(result.matched[rental.pk] == ["customer"] for rental in rentals)


def test_the_results_show_the_removal_countdown_of_a_live_rental(make_rental, sam, client_for) -> None:
    at = (timezone.now() + timedelta(days=2, hours=1, minutes=30)).replace(microsecond=0)
    make_rental(pod_name="sweep-live", status="ready", removal_scheduled_at=at)
    make_rental(pod_name="sweep-gone", status="terminated", removal_scheduled_at=at)
    make_rental(pod_name="sweep-none", status="ready")
    html = client_for(sam).get("/ops/search/", {"q": "sweep"}).content.decode()
    rows = {row.split("</a>")[0].rsplit(">", 1)[1]: row for row in html.split("<tr><td>")[1:]}
    assert set(rows) == {"sweep-live", "sweep-gone", "sweep-none"}
    assert "removes in" in rows["sweep-live"] and "2 d 1 h" in rows["sweep-live"]
    assert (
        f'data-countdown="{at.isoformat()}"' in rows["sweep-live"] and f"{at:%Y-%m-%d %H:%M} UTC" in rows["sweep-live"]
    )
    assert "removes in" not in rows["sweep-gone"], "a terminated rental removes nothing any more"
    assert "removes in" not in rows["sweep-none"]


def test_an_overlay_ip_shared_by_many_clusters_lists_the_newest_rentals(make_rental) -> None:
    """Clusters reuse their private overlay addresses: the search shows the rentals that hold one now."""
    rentals = [make_rental(status="ready") for _ in range(SEARCH_RESULTS + 10)]
    now = timezone.now()
    for age, rental in enumerate(rentals):  # created in id order, the last one newest
        Rental.objects.filter(pk=rental.pk).update(created_at=now - timedelta(minutes=len(rentals) - age))
        ClusterMember.objects.create(rental=rental, pod_id=f"pod-ip-{rental.pk}", rank=0, overlay_ip="10.77.0.1")
    result = rental_search(text="10.77.0.1")
    assert result.truncated
    assert [row["pk"] for row in result.rentals] == [rental.pk for rental in reversed(rentals)][:SEARCH_RESULTS]


def test_a_name_prefix_of_many_customers_lists_the_newest_rentals_across_them(make_rental, acme) -> None:
    from accounts.models import Customer

    customers = [
        Customer.objects.create(name=f"Manyfold {index:02d}", default_credential=acme.default_credential)
        for index in range(12)
    ]
    now = timezone.now()
    rentals = [make_rental(customer=customers[index % len(customers)]) for index in range(SEARCH_RESULTS + 22)]
    for age, rental in enumerate(rentals):  # customers interleaved, the last one created the newest
        Rental.objects.filter(pk=rental.pk).update(created_at=now - timedelta(minutes=len(rentals) - age))
    result = rental_search(text="manyfold")
    assert result.truncated
    assert [row["pk"] for row in result.rentals] == [rental.pk for rental in reversed(rentals)][:SEARCH_RESULTS]


@pytest.mark.parametrize("held_as", ["requested node", "member"])
def test_an_executor_id_shared_by_many_rentals_lists_the_newest_rentals(make_rental, held_as: str) -> None:
    """A node is rented again and again over time: the search shows the rentals that hold it now, not its first."""
    rentals = []
    for _ in range(SEARCH_RESULTS + 10):
        if held_as == "requested node":
            rentals.append(make_rental(status="ready", executors=["exec-reused", "exec-other"]))
        else:
            rental = make_rental(status="ready")
            ClusterMember.objects.create(rental=rental, pod_id=f"pod-ex-{rental.pk}", executor_id="exec-reused")
            rentals.append(rental)
    now = timezone.now()
    for age, rental in enumerate(rentals):  # created in id order, the last one newest
        Rental.objects.filter(pk=rental.pk).update(created_at=now - timedelta(minutes=len(rentals) - age))
    result = rental_search(text="exec-reused")
    assert result.truncated
    assert [row["pk"] for row in result.rentals] == [rental.pk for rental in reversed(rentals)][:SEARCH_RESULTS]
    assert all(result.matched[row["pk"]] == ["executor id"] for row in result.rentals)
