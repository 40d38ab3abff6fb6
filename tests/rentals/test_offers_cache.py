"""The offer listing is read from the upstream once per cache period and shared by every process.

Each process keeps the listing it last unpickled; what it reads per request is the listing's stamp and the
nodes taken since, so a just-ordered node disappears everywhere without another upstream call.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.conf import settings
from django.core.cache.backends import locmem

from rentals import offers
from rentals.upstream.parse_offers import Fabric, offer_listing

pytestmark = pytest.mark.django_db


class CountingUpstream:
    """Stands in for the Lium client: two fabrics of three nodes, and how many times it was listed."""

    def __init__(self) -> None:
        self.calls = 0

    def list_offers(self) -> list[Fabric]:
        self.calls += 1
        return offer_listing(
            [
                {
                    "fabric_id": f"fab-{f}",
                    "nodes": [{"id": f"n{f}{i}", "gpu_count": 8, "price_per_gpu": "2"} for i in range(3)],
                }
                for f in range(2)
            ]
        )


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> CountingUpstream:
    fake = CountingUpstream()
    monkeypatch.setattr(offers.upstream, "client_for", lambda credential: fake)
    return fake


class WallClock:
    """`time` as the offer cache and the local-memory cache read it, with `time()` moved by hand.

    Only those two modules see it: the rest of the process (pytest, logging, the database) keeps the real clock.
    """

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> WallClock:
    clock = WallClock()
    monkeypatch.setattr(offers, "time", clock)
    monkeypatch.setattr(locmem, "time", clock)
    return clock


def free_ids(listing: offers.OfferListing) -> set[str]:
    return {node.id for fabric in listing.fabrics for node in fabric.nodes}


def other_process() -> None:
    """Forget what this process unpickled, as a second web process would not have it."""
    offers._parsed.clear()
    offers._views.clear()


def test_the_listing_is_fetched_once_per_cache_period(credential, upstream: CountingUpstream) -> None:
    first = offers.offers_get(credential=credential)
    other_process()
    second = offers.offers_get(credential=credential)
    assert upstream.calls == 1 and free_ids(first) == free_ids(second) == {"n00", "n01", "n02", "n10", "n11", "n12"}


def test_taken_nodes_vanish_for_every_process_until_the_next_refresh(
    credential, upstream: CountingUpstream, wall_clock: WallClock
) -> None:
    offers.offers_get(credential=credential)
    offers.offers_take(credential=credential, node_ids=["n00", "n01"])
    assert "n00" not in free_ids(offers.offers_get(credential=credential))
    other_process()
    offers.offers_take(credential=credential, node_ids=["n10"])
    assert free_ids(offers.offers_get(credential=credential)) == {"n02", "n11", "n12"}
    assert upstream.calls == 1, "taking nodes never refetches the listing"
    wall_clock.now += settings.LIUM_OFFERS_CACHE_SECONDS + 1  # past the hold on the taken nodes
    refreshed = offers.offers_get(credential=credential, refresh=True)
    assert upstream.calls == 2 and "n00" in free_ids(refreshed), "a later refresh brings the upstream's truth back"


def test_a_node_ordered_a_moment_ago_stays_hidden_when_the_listing_is_refreshed(
    credential, upstream: CountingUpstream, wall_clock: WallClock
) -> None:
    """A listing fetched before Lium has the order (the rent call queued or slow) still shows its nodes free:
    offering them again would send the next customer to a sure refusal."""
    offers.offers_get(credential=credential)
    offers.offers_take(credential=credential, node_ids=["n00"])
    wall_clock.now += 2  # well inside the hold
    refreshed = offers.offers_get(credential=credential, refresh=True)
    assert upstream.calls == 2, "the refresh asked the upstream"
    assert "n00" not in free_ids(refreshed), "the fresh listing, which still lists it, must not offer it"


def test_a_refresh_asked_after_a_change_reads_the_upstream_again(
    credential, upstream: CountingUpstream, wall_clock: WallClock
) -> None:
    """A scheduled send refreshes to see whether its nodes were taken meanwhile (by another account, say): a listing
    fetched a moment before that, however recent, cannot tell it (CI once sent such an order instead of refusing it)."""
    offers.offers_get(credential=credential)
    offers.offers_get(credential=credential, refresh=True)  # the same instant as the first fetch
    assert upstream.calls == 2


def test_refreshes_waiting_for_one_another_share_one_upstream_call(credential, upstream: CountingUpstream) -> None:
    """Many threads asking for a refresh at once (single flight): the ones that waited take the listing fetched
    while they waited."""
    started = threading.Barrier(4)
    slow_list = upstream.list_offers

    def list_offers_slowly() -> list[Fabric]:
        time.sleep(0.3)
        return slow_list()

    upstream.list_offers = list_offers_slowly  # type: ignore[method-assign]

    def refresh() -> None:
        started.wait()
        offers.offers_get(credential=credential, refresh=True)

    threads = [threading.Thread(target=refresh) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert upstream.calls == 1


def test_taken_nodes_stay_hidden_as_long_as_the_listing_they_were_taken_from(
    credential, upstream: CountingUpstream, wall_clock: WallClock
) -> None:
    """The taken set must not expire before the cached listing does: for the last moments of that listing the
    nodes would be offered again (the compose upgrade run's second rental was refused for exactly this).

    Only the local-memory cache reads its expiry from `time.time`, so this one can fail only on the embedded
    default; the Redis cache runs the same code.
    """
    start = wall_clock.now
    offers.offers_get(credential=credential)
    wall_clock.now = start + 1.6  # ordered 1.6 s into the listing's life
    offers.offers_take(credential=credential, node_ids=["n00"])
    wall_clock.now = start + settings.LIUM_OFFERS_CACHE_SECONDS - 0.3  # the listing is still served
    listing = offers.offers_get(credential=credential)
    assert upstream.calls == 1, "the same cached listing"
    assert "n00" not in free_ids(listing)
