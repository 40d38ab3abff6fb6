"""The offer listing is read from the upstream once per cache period and shared by every process.

Each process keeps the listing it last unpickled; what it reads per request is the listing's stamp and the
nodes taken since, so a just-ordered node disappears everywhere without another upstream call.
"""

from __future__ import annotations

import time

import pytest

from rentals import offers
from rentals.upstream_parse_offers import offer_listing

pytestmark = pytest.mark.django_db


class CountingUpstream:
    """Stands in for the Lium client: two fabrics of three nodes, and how many times it was listed."""

    def __init__(self) -> None:
        self.calls = 0

    def list_offers(self) -> list[offers.Fabric]:
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
    credential, upstream: CountingUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    offers.offers_get(credential=credential)
    offers.offers_take(credential=credential, node_ids=["n00", "n01"])
    assert "n00" not in free_ids(offers.offers_get(credential=credential))
    other_process()
    offers.offers_take(credential=credential, node_ids=["n10"])
    assert free_ids(offers.offers_get(credential=credential)) == {"n02", "n11", "n12"}
    assert upstream.calls == 1, "taking nodes never refetches the listing"
    later = time.time() + 5  # a refresh within a second of the last one is served from the cache
    monkeypatch.setattr(time, "time", lambda: later)
    refreshed = offers.offers_get(credential=credential, refresh=True)
    assert upstream.calls == 2 and "n00" in free_ids(refreshed), "a refresh brings the upstream's truth back"


def test_forgetting_the_listing_fetches_it_again(credential, upstream: CountingUpstream) -> None:
    offers.offers_get(credential=credential)
    offers.offers_forget(credential=credential)
    offers.offers_get(credential=credential)
    assert upstream.calls == 2
