"""Fabric offers and cluster templates, read from the upstream and cached briefly.

A busy fabric page must not hammer the upstream: the listing is cached for LIUM_OFFERS_CACHE_SECONDS
per credential, and only one request per process refreshes it at a time (single flight).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, replace

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError

from accounts.models import UpstreamCredential
from rentals import upstream
from rentals.upstream.parse_offers import Fabric

CLUSTER_IMAGE_PREFIX = "daturaai/lium-cluster"
_refresh_locks: dict[str, threading.Lock] = {}
_refresh_locks_guard = threading.Lock()


@dataclass(frozen=True)
class OfferListing:
    fabrics: list[Fabric]
    fetched_at: float

    @property
    def age_seconds(self) -> int:
        return int(time.time() - self.fetched_at)

    def fabric(self, fabric_id: str) -> Fabric | None:
        return next((fabric for fabric in self.fabrics if fabric.fabric_id == fabric_id), None)


# The shared cache holds the pickled listing (about 0.3 MB at 64 x 32 nodes: 10-20 ms to read and unpickle),
# its `fetched_at` stamp and the ids taken lately (both tiny). Each process keeps the listing it last unpickled
# and reads only the stamp and the taken ids per request: a new stamp is the only reason to read it again.
_parsed: dict[int, OfferListing] = {}  # credential pk -> the listing this process last unpickled
_views: dict[int, tuple[float, frozenset[str], OfferListing]] = {}  # ... and that listing minus the taken ids


def _keys(credential: UpstreamCredential) -> tuple[str, str, str]:
    base = f"offers:{credential.pk}"
    return base, f"{base}:stamp", f"{base}:taken"


def _shared_listing(credential: UpstreamCredential) -> OfferListing | None:
    """Return the cached listing without the nodes taken lately, or None when there is none."""
    listing_key, stamp_key, taken_key = _keys(credential)
    found = cache.get_many([stamp_key, taken_key])
    stamp = found.get(stamp_key)
    if stamp is None:
        return None
    listing = _parsed.get(credential.pk)
    if listing is None or listing.fetched_at != stamp:
        listing = cache.get(listing_key)
        if listing is None or listing.fetched_at != stamp:
            return None  # expired, or replaced between the two reads: refresh
        _parsed[credential.pk] = listing
    return _without_taken(credential, listing, _still_taken(found.get(taken_key)))


def _without_taken(credential: UpstreamCredential, listing: OfferListing, taken: frozenset[str]) -> OfferListing:
    """Return the listing without the taken nodes (built once per listing and taken set in each process)."""
    if not taken:
        return listing
    view = _views.get(credential.pk)
    if view is not None and view[0] == listing.fetched_at and view[1] == taken:
        return view[2]
    fabrics = [replace(fabric, nodes=[n for n in fabric.nodes if n.id not in taken]) for fabric in listing.fabrics]
    result = replace(listing, fabrics=fabrics)
    _views[credential.pk] = (listing.fetched_at, taken, result)
    return result


def offers_get(*, credential: UpstreamCredential, refresh: bool = False) -> OfferListing:
    """Return the fabric offers (cached); raise `upstream.UpstreamError` when they cannot be read."""
    if not refresh:
        cached = _shared_listing(credential)
        if cached is not None:
            return cached
    asked_at = time.time()
    listing_key, stamp_key, taken_key = _keys(credential)
    with _refresh_locks_guard:
        lock = _refresh_locks.setdefault(listing_key, threading.Lock())
    with lock:
        # Another thread may have refreshed while this one waited for the lock; a refresh takes only a listing
        # fetched after it was asked for, never one from before a change it is meant to see.
        cached = _shared_listing(credential)
        if cached is not None and (not refresh or cached.fetched_at > asked_at):
            return cached
        listing = OfferListing(fabrics=upstream.client_for(credential).list_offers(), fetched_at=time.time())
        # The listing before its stamp: a reader that sees the stamp finds the listing it names.
        cache.set(listing_key, listing, settings.LIUM_OFFERS_CACHE_SECONDS)
        cache.set(stamp_key, listing.fetched_at, settings.LIUM_OFFERS_CACHE_SECONDS)
        _parsed[credential.pk] = listing
        return _without_taken(credential, listing, _still_taken(cache.get(taken_key)))


def offers_take(*, credential: UpstreamCredential, node_ids: list[str]) -> None:
    """Hide just-ordered nodes from the listing for LIUM_OFFERS_CACHE_SECONDS (instead of refetching it).

    Each node is hidden from its order on, across refreshes: the listing cached then outlives it by less
    than that, and a listing fetched before Lium has the order (a queued or slow rent call) still shows it
    free. Two orders in the same instant may each keep only their own ids; the upstream refuses a taken node.
    """
    taken_key = _keys(credential)[2]
    now, hold = time.time(), settings.LIUM_OFFERS_CACHE_SECONDS
    taken = {node_id: until for node_id, until in _taken_until(cache.get(taken_key)).items() if until > now}
    taken.update(dict.fromkeys(node_ids, now + hold))
    cache.set(taken_key, taken, hold + 1)  # the key outlives the last id it holds


def _taken_until(value: object) -> dict[str, float]:
    """Read the taken set: node id -> when it is offered again (anything else, e.g. an older format, is none)."""
    return value if isinstance(value, dict) else {}


def _still_taken(value: object) -> frozenset[str]:
    now = time.time()
    return frozenset(node_id for node_id, until in _taken_until(value).items() if until > now)


def _tag_key(tag: str) -> tuple[tuple[int, int | str], ...]:
    # Numeric parts compare as numbers and beat any text part (so `latest` loses to a numbered tag).
    return tuple((1, int(part)) if part.isdigit() else (0, part) for part in re.split(r"[.-]", tag))


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    image: str
    tag: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.image}:{self.tag})"


def cluster_templates(*, credential: UpstreamCredential) -> list[Template]:
    """Return the cluster templates, newest tag first (cached like the offers)."""
    cache_key = f"templates:{credential.pk}"
    cached = cache.get(cache_key)
    if cached is not None:
        return cached
    templates = [
        Template(id=row.id, name=row.name, image=row.docker_image, tag=row.docker_image_tag)
        for row in upstream.client_for(credential).list_templates()
        if row.docker_image.startswith(CLUSTER_IMAGE_PREFIX)
    ]
    templates.sort(key=lambda template: _tag_key(template.tag), reverse=True)
    cache.set(cache_key, templates, 300)
    return templates


def node_selection_check(*, chosen: list[str], fabric: Fabric, listing: OfferListing) -> None:
    """Accept only this fabric's free whole nodes, each once, at least two; raise ValidationError saying why.

    The rent form and the JSON API both call this, so a customer hears the same reason either way.
    """
    if len(chosen) != len(set(chosen)):
        raise ValidationError("The same node is selected twice; select each node once.", code="duplicate_nodes")
    free_here = {node.id for node in fabric.nodes}
    gone = [node_id for node_id in chosen if node_id not in free_here]
    if gone:
        # Only a node missing here is looked for on the other fabrics (2,000 nodes: not on every order).
        elsewhere = {
            node.id: other.fabric_id
            for other in listing.fabrics
            for node in other.nodes
            if other.fabric_id != fabric.fabric_id
        }
        foreign = [node_id for node_id in gone if node_id in elsewhere]
        if foreign:
            raise ValidationError(
                "All nodes of a cluster must be on one fabric; "
                f"{len(foreign)} selected node(s) are on another fabric ({elsewhere[foreign[0]]}).",
                code="mixed_fabrics",
            )
        raise ValidationError(
            f"{len(gone)} selected node(s) are no longer free on this fabric; refresh the list and pick again.",
            code="node_not_free",
        )
    split = [node for node in fabric.nodes if node.id in chosen and not node.whole]
    if split:
        raise ValidationError(
            f"{len(split)} selected node(s) are partly rented; a cluster takes whole nodes only. Pick other nodes.",
            code="whole_nodes_only",
        )
    if len(chosen) < 2:
        raise ValidationError("A cluster needs at least 2 nodes; select 2 or more.", code="too_few_nodes")
