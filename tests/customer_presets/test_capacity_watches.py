"""Capacity watches against the simulator: made (with Lium's demand signal), checked by the one scan from the
offers cache, fired once; `auto_rent` rents exactly once through the order service, even when two scans race."""

from __future__ import annotations

import json
import threading
from decimal import Decimal

import pytest
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import connection

from billing.quotas import quota_set_by_operator
from notifications import events as ev
from notifications.models import EmailPreference, Event
from presets import watching
from presets.matching import nodes_pick
from presets.models import CapacityWatch
from rentals import offers, selectors
from rentals.models import Rental
from tests.conftest import Simulator
from tests.customer_presets.conftest import H100

pytestmark = pytest.mark.django_db
Status = CapacityWatch.Status


@pytest.fixture
def subscribed(alice):  # type: ignore[no-untyped-def]
    """Alice gets `capacity.available` by e-mail (so the outbox writes the event)."""
    EmailPreference.objects.create(user=alice, events=[ev.CAPACITY_AVAILABLE])


def _all_h100(simulator: Simulator) -> list[str]:
    return [n["id"] for offer in simulator.offers() if offer["fabric_id"] == H100 for n in offer["nodes"]]


def _watch(acme, alice, **fields):  # type: ignore[no-untyped-def]
    wanted = {"node_count": 2, "gpu_type": "H100", "max_price_per_node_hour": Decimal("17.5"), **fields}
    preset = wanted.pop("preset", None)
    return watching.watch_create(customer=acme, created_by=alice, fields=wanted, preset=preset)


def _events() -> list[dict]:
    return [json.loads(event.body)["data"] for event in Event.objects.filter(type=ev.CAPACITY_AVAILABLE)]


def test_a_watch_fires_once_when_the_simulator_frees_nodes(
    simulator: Simulator, acme, alice, subscribed, enqueued
) -> None:  # type: ignore[no-untyped-def]
    everything = _all_h100(simulator)
    simulator.config(taken_executors=everything)
    watch = _watch(acme, alice)
    assert watching.watches_scan() == 0
    watch.refresh_from_db()
    assert watch.status == Status.ACTIVE and _events() == []
    simulator.config(taken_executors=everything[2:])  # two nodes come free
    cache.clear()  # the offers cache would show them within LIUM_OFFERS_CACHE_SECONDS
    assert watching.watches_scan() == 1
    watch.refresh_from_db()
    assert watch.status == Status.FIRED and sorted(watch.executor_ids) == sorted(everything[:2])
    [data] = _events()
    assert data["executor_ids"] == watch.executor_ids and data["fabric_id"] == H100
    assert f"nodes={'%2C'.join(watch.executor_ids)}" in data["rent_url"]
    assert watching.watches_scan() == 0 and len(_events()) == 1  # fired once, ended


def test_one_offer_listing_serves_every_watch_of_a_credential(simulator: Simulator, acme, alice, enqueued) -> None:  # type: ignore[no-untyped-def]
    for count in (2, 3, 9, 30):
        _watch(acme, alice, node_count=count, max_price_per_node_hour=None)
    before = len(simulator.requests("offers"))
    watching.watches_scan()
    assert len(simulator.requests("offers")) == before + 1


def test_a_watch_that_did_not_match_in_time_expires(simulator: Simulator, acme, alice, clock, enqueued) -> None:  # type: ignore[no-untyped-def]
    simulator.config(taken_executors=_all_h100(simulator))
    watch = _watch(acme, alice, hours=2)
    clock.advance(hours=2, seconds=1)
    watching.watches_scan()
    watch.refresh_from_db()
    assert watch.status == Status.EXPIRED and "Expired" in watch.outcome


def test_auto_rent_needs_a_preset(simulator: Simulator, acme, alice) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as refused:
        _watch(acme, alice, auto_rent=True)
    assert "only from a preset" in refused.value.message_dict["auto_rent"][0]


def test_an_auto_renting_watch_rents_exactly_once_when_two_scans_race(  # type: ignore[no-untyped-def]
    simulator: Simulator, acme, alice, make_preset, subscribed, enqueued
) -> None:
    watch = _watch(acme, alice, preset=make_preset(), auto_rent=True)
    # Two scans read the watch as active at the same moment; each found the same nodes.
    first, second = CapacityWatch.objects.get(pk=watch.pk), CapacityWatch.objects.get(pk=watch.pk)
    credential = selectors.customer_credential(acme)
    assert credential is not None
    listing = offers.offers_get(credential=credential)
    pick, _ = nodes_pick(first.want, listing)
    assert pick is not None
    assert watching.watch_fire(first, pick) is True
    assert watching.watch_fire(second, pick) is False
    rental = Rental.objects.get()
    assert rental.executor_ids == pick.executor_ids and rental.pod_name == "train"
    assert json.loads(bytes(rental.request_body))["termination_hours"] == 5
    assert rental.submit_token == watching.watch_submit_token(watch)
    watch.refresh_from_db()
    assert (watch.status, watch.rental) == (Status.FIRED, rental)
    [data] = _events()
    assert data["rental"]["id"] == str(rental.public_id) and "Rented them" in data["message"]
    assert watching.watches_scan() == 0 and Rental.objects.count() == 1


def test_an_auto_rent_refused_by_a_quota_ends_failed_and_says_why(  # type: ignore[no-untyped-def]
    simulator: Simulator, acme, alice, make_preset, subscribed, enqueued
) -> None:
    quota_set_by_operator(customer=acme, max_gpus=None, max_clusters=None, max_hourly_usd=Decimal(1))
    watch = _watch(acme, alice, preset=make_preset(), auto_rent=True)
    assert watching.watches_scan() == 1
    watch.refresh_from_db()
    assert watch.status == Status.FAILED and "Not rented" in watch.outcome
    assert not Rental.objects.exists()
    [data] = _events()
    assert "Not rented" in data["message"] and data["executor_ids"]


def test_making_a_watch_sends_lium_the_demand_signal(simulator: Simulator, acme, alice, enqueued) -> None:  # type: ignore[no-untyped-def]
    watch = _watch(acme, alice)
    watching.watch_demand_signal(watch.pk)  # what the enqueued task runs
    asked = simulator.http.get("/api/machine-requests", headers={"X-API-Key": "sim-demo-key"}).json()
    assert [row["machine_name"] for row in asked] == ["NVIDIA H100 80GB HBM3"]
    watch.refresh_from_db()
    assert "notified" in watch.demand_signal and watch.status == Status.ACTIVE


def test_a_failed_demand_signal_never_blocks_the_watch(simulator: Simulator, acme, alice, enqueued) -> None:  # type: ignore[no-untyped-def]
    simulator.faults([{"fault": "error_before_commit", "route": "machine-requests", "status": 503}])
    watch = _watch(acme, alice)
    watching.watch_demand_signal(watch.pk)
    watch.refresh_from_db()
    assert watch.status == Status.ACTIVE and "failed" in watch.demand_signal
    assert watching.watches_scan() == 1  # and it still fires


def test_the_demand_signal_is_enqueued_once_the_watch_is_committed(  # type: ignore[no-untyped-def]
    simulator: Simulator, acme, alice, enqueued, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        watch = _watch(acme, alice)
    assert (watching.DEMAND_SIGNAL_TASK, (watch.pk,), None) in enqueued.calls


@pytest.mark.django_db(transaction=True)
def test_two_scans_at_once_rent_once(simulator: Simulator, acme, alice, make_preset, enqueued) -> None:  # type: ignore[no-untyped-def]
    """Two beat runs in two threads, each with its own database connection, released together."""
    watch = _watch(acme, alice, preset=make_preset(), auto_rent=True)
    start = threading.Barrier(2)
    fired: list[int] = []

    def scan() -> None:
        try:
            start.wait(timeout=10)
            fired.append(watching.watches_scan())
        finally:
            connection.close()

    threads = [threading.Thread(target=scan) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(fired) == [0, 1]
    assert Rental.objects.count() == 1
    watch.refresh_from_db()
    assert watch.rental == Rental.objects.get()


def test_the_email_links_to_the_rent_form_on_the_nodes(
    simulator: Simulator, acme, alice, subscribed, enqueued, mailoutbox
) -> None:  # type: ignore[no-untyped-def]
    from notifications.delivery import delivery_attempt
    from notifications.models import Delivery

    watch = _watch(acme, alice)
    assert watching.watches_scan() == 1
    delivery_attempt(delivery_id=Delivery.objects.get(kind=Delivery.Kind.EMAIL).pk)
    [mail] = mailoutbox
    assert "Capacity available" in mail.subject
    watch.refresh_from_db()
    site = settings.SITE_URL.rstrip("/")
    assert f"Open the rent form on those nodes: {site}/rent/?fabric=" in mail.body
    assert "%2C".join(watch.executor_ids) in mail.body and "2 x NVIDIA H100 80GB HBM3 free" in mail.body
