"""Fabric offers and cluster templates, read from the upstream and cached briefly.

A busy fabric page must not hammer the upstream: the listing is cached for LIUM_OFFERS_CACHE_SECONDS
per credential, and only one request per process refreshes it at a time (single flight).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError

from accounts.models import UpstreamCredential
from rentals import upstream

CLUSTER_IMAGE_PREFIX = "daturaai/lium-cluster"
_refresh_locks: dict[str, threading.Lock] = {}
_refresh_locks_guard = threading.Lock()


@dataclass(frozen=True)
class Node:
    """One free node (a whole executor) of a fabric."""

    id: str
    machine_name: str
    gpu_count: int
    price_per_gpu: Decimal
    location: str
    country_code: str
    reliability_score: float | None
    max_cuda_version: str
    nvlink: bool
    gpu_power_limited: bool
    last_verified_at: str
    ip: str
    available_gpu_count: int | None = None

    @property
    def price_per_hour(self) -> Decimal:
        return self.price_per_gpu * self.gpu_count

    @property
    def whole(self) -> bool:
        """Whether every GPU of the host is free: a cluster rents whole nodes only."""
        return self.available_gpu_count is None or self.available_gpu_count >= self.gpu_count


@dataclass(frozen=True)
class Fabric:
    """A fabric offer: free nodes on one RDMA fabric."""

    fabric_id: str
    fabric_type: str
    link_rate: str
    measured: bool
    node_count: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def free_count(self) -> int:
        return len(self.nodes)

    @property
    def gpu_type(self) -> str:
        return self.nodes[0].machine_name if self.nodes else ""

    @property
    def gpus_per_node(self) -> int:
        return self.nodes[0].gpu_count if self.nodes else 0

    @property
    def cheapest_node_hour(self) -> Decimal | None:
        return min((node.price_per_hour for node in self.nodes), default=None)

    def cheapest(self, count: int) -> list[Node]:
        """Return the `count` cheapest nodes, by price then id (as the official CLI picks them)."""
        whole = [node for node in self.nodes if node.whole]
        return sorted(whole, key=lambda node: (node.price_per_hour, node.id))[:count]


@dataclass(frozen=True)
class OfferListing:
    fabrics: list[Fabric]
    fetched_at: float

    @property
    def age_seconds(self) -> int:
        return int(time.time() - self.fetched_at)

    def fabric(self, fabric_id: str) -> Fabric | None:
        return next((fabric for fabric in self.fabrics if fabric.fabric_id == fabric_id), None)


def _decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def parse_node(row: dict[str, Any]) -> Node:
    location = row.get("location")
    if not isinstance(location, dict):
        location = {}
    score = row.get("reliability_score")
    return Node(
        id=str(row.get("id")),
        machine_name=str(row.get("machine_name") or ""),
        gpu_count=_int(row.get("gpu_count")),
        price_per_gpu=_decimal(row.get("price_per_gpu") or 0),
        location=", ".join(str(part) for part in (location.get("city"), location.get("country")) if part),
        country_code=str(location.get("country_code") or ""),
        reliability_score=float(score) if isinstance(score, int | float) else None,
        max_cuda_version=str(row.get("max_cuda_version") or ""),
        nvlink=bool(row.get("nvlink")),
        gpu_power_limited=bool(row.get("gpu_power_limited")),
        last_verified_at=str(row.get("last_verified_at") or ""),
        ip=str(row.get("executor_ip_address") or ""),
        available_gpu_count=_int(row["available_gpu_count"]) if row.get("available_gpu_count") is not None else None,
    )


def parse_offer(row: dict[str, Any]) -> Fabric:
    nodes = [parse_node(node) for node in row.get("nodes") or [] if isinstance(node, dict)]
    return Fabric(
        fabric_id=str(row.get("fabric_id")),
        fabric_type=str(row.get("fabric_type") or "infiniband"),
        link_rate=str(row.get("link_rate") or ""),
        measured=bool(row.get("fabric_measured")),
        node_count=_int(row.get("node_count")) or len(nodes),
        nodes=nodes,
    )


# The shared cache holds the pickled listing (about 0.3 MB at 64 x 32 nodes: 10-20 ms to read and unpickle),
# its `fetched_at` stamp and the ids taken since (both tiny). Each process keeps the listing it last unpickled
# and reads only the stamp and the taken ids per request: a new stamp is the only reason to read it again.
_parsed: dict[int, OfferListing] = {}  # credential pk -> the listing this process last unpickled
_views: dict[int, tuple[float, frozenset[str], OfferListing]] = {}  # ... and that listing minus the taken ids


def _keys(credential: UpstreamCredential) -> tuple[str, str, str]:
    base = f"offers:{credential.pk}"
    return base, f"{base}:stamp", f"{base}:taken"


def _shared_listing(credential: UpstreamCredential) -> OfferListing | None:
    """Return the cached listing without the nodes taken since it was fetched, or None when there is none."""
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
    taken = found.get(taken_key) or frozenset()
    if not taken:
        return listing
    view = _views.get(credential.pk)
    if view is not None and view[0] == stamp and view[1] == taken:
        return view[2]
    fabrics = [replace(fabric, nodes=[n for n in fabric.nodes if n.id not in taken]) for fabric in listing.fabrics]
    result = replace(listing, fabrics=fabrics)
    _views[credential.pk] = (stamp, taken, result)
    return result


def offers_get(*, credential: UpstreamCredential, refresh: bool = False) -> OfferListing:
    """Return the fabric offers (cached); raise `upstream.UpstreamError` when they cannot be read."""
    if not refresh:
        cached = _shared_listing(credential)
        if cached is not None:
            return cached
    listing_key, stamp_key, taken_key = _keys(credential)
    with _refresh_locks_guard:
        lock = _refresh_locks.setdefault(listing_key, threading.Lock())
    with lock:
        # Another thread may have refreshed while this one waited for the lock.
        cached = _shared_listing(credential)
        if cached is not None and (not refresh or cached.age_seconds < 1):
            return cached
        rows = upstream.client_for(credential).list_offers()
        listing = OfferListing(
            fabrics=[parse_offer(row) for row in rows if isinstance(row, dict)], fetched_at=time.time()
        )
        # The listing before its stamp: a reader that sees the stamp finds the listing it names.
        cache.set(listing_key, listing, settings.LIUM_OFFERS_CACHE_SECONDS)
        cache.delete(taken_key)
        cache.set(stamp_key, listing.fetched_at, settings.LIUM_OFFERS_CACHE_SECONDS)
        _parsed[credential.pk] = listing
        return listing


def offers_forget(*, credential: UpstreamCredential) -> None:
    """Drop the cached listing, so the next page reads it afresh."""
    cache.delete_many(list(_keys(credential)))


def offers_take(*, credential: UpstreamCredential, node_ids: list[str]) -> None:
    """Hide just-ordered nodes from the cached listing (instead of refetching the whole listing).

    The next refresh brings the upstream's truth anyway; until then nobody is offered a node we just took.
    Two orders in the same instant may each keep only their own ids; the upstream refuses a taken node anyway.
    """
    _listing_key, stamp_key, taken_key = _keys(credential)
    found = cache.get_many([stamp_key, taken_key])
    stamp = found.get(stamp_key)
    if stamp is None:
        return
    taken = frozenset(found.get(taken_key) or ()) | frozenset(node_ids)
    remaining = max(1, int(settings.LIUM_OFFERS_CACHE_SECONDS - (time.time() - stamp)))
    cache.set(taken_key, taken, remaining)


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
    rows = upstream.client_for(credential).list_templates()
    templates = [
        Template(
            id=str(row.get("id")),
            name=str(row.get("name") or ""),
            image=str(row.get("docker_image") or ""),
            tag=str(row.get("docker_image_tag") or "latest"),
        )
        for row in rows
        if isinstance(row, dict) and str(row.get("docker_image") or "").startswith(CLUSTER_IMAGE_PREFIX)
    ]
    templates.sort(key=lambda template: _tag_key(template.tag), reverse=True)
    cache.set(cache_key, templates, 300)
    return templates


def check_node_selection(*, chosen: list[str], fabric: Fabric, listing: OfferListing) -> None:
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
