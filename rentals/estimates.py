"""Lium's deployment estimates for a set of nodes: how long until a cluster would be ready.

Read with the customer's credential, a few at a time, each cached for LIUM_ESTIMATE_CACHE_SECONDS per
credential, template and node. A page waits at most LIUM_ESTIMATE_TIMEOUT_SECONDS for them: a node whose estimate
did not come is "unknown" (so is the cluster), and the page is shown anyway. A cluster is ready when its slowest
node is, so its estimate is the largest of its nodes'.
"""

from __future__ import annotations

import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from accounts.models import UpstreamCredential
from rentals import offers, upstream
from rentals.upstream.parse_estimate import DeploymentEstimate

logger = logging.getLogger(__name__)

MAX_CONCURRENT = 8  # calls in flight per page: a fabric of 32 nodes takes four rounds, not 32 connections
FAILED = "failed"  # cached in place of an estimate Lium did not give, so the next refresh does not wait again
FAILED_CACHE_SECONDS = 15


@dataclass(frozen=True)
class ClusterEstimate:
    """The estimated time to ready of a set of nodes: the slowest one's, with Lium's warnings."""

    seconds: int | None  # None: unknown (some node's estimate did not come)
    slow_nodes: int
    warnings: tuple[str, ...]
    unknown_nodes: int

    @property
    def known(self) -> bool:
        return self.seconds is not None


def _key(credential: UpstreamCredential, template_id: str, executor_id: str) -> str:
    digest = hashlib.sha256(f"{template_id}\n{executor_id}".encode()).hexdigest()[:32]
    return f"estimate:{credential.pk}:{digest}"


def estimates_read(
    *, credential: UpstreamCredential | None, template_id: str | None, executor_ids: list[str]
) -> dict[str, DeploymentEstimate | None]:
    """Return each node's estimate (None: unknown), from the cache or from Lium within the page's wait."""
    wanted = list(dict.fromkeys(executor_ids))
    if credential is None or not template_id or not wanted:
        return dict.fromkeys(wanted)
    keys = {executor_id: _key(credential, template_id, executor_id) for executor_id in wanted}
    cached = cache.get_many(list(keys.values()))
    found: dict[str, DeploymentEstimate | None] = {}
    missing = []
    for executor_id, key in keys.items():
        value = cached.get(key)
        if isinstance(value, DeploymentEstimate):
            found[executor_id] = value
        elif value == FAILED:
            found[executor_id] = None
        else:
            missing.append(executor_id)
    if missing:
        fetched = _fetch(credential, template_id, missing)
        found |= fetched
        cache.set_many({keys[e]: v for e, v in fetched.items() if v is not None}, settings.LIUM_ESTIMATE_CACHE_SECONDS)
        failed_for = min(FAILED_CACHE_SECONDS, settings.LIUM_ESTIMATE_CACHE_SECONDS)
        cache.set_many({keys[e]: FAILED for e, v in fetched.items() if v is None}, failed_for)
    return found


def _fetch(
    credential: UpstreamCredential, template_id: str, executor_ids: list[str]
) -> dict[str, DeploymentEstimate | None]:
    """Ask Lium for each node's estimate, at most MAX_CONCURRENT at once, all within the page's wait."""
    wait_seconds = float(settings.LIUM_ESTIMATE_TIMEOUT_SECONDS)
    deadline = time.monotonic() + wait_seconds
    try:
        client = upstream.client_for(credential)
    except Exception as exc:  # a secret that does not decrypt: no estimates, the page still works
        logger.warning("Deployment estimates not read: the credential cannot be used (%s).", type(exc).__name__)
        return dict.fromkeys(executor_ids)

    def one(executor_id: str) -> DeploymentEstimate | None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return client.deployment_estimate(executor_id, template_id, budget_seconds=left)
        except upstream.UpstreamError as exc:
            logger.info("No deployment estimate for executor %s: %s", executor_id, type(exc).__name__)
            return None

    pool = ThreadPoolExecutor(max_workers=min(MAX_CONCURRENT, len(executor_ids)), thread_name_prefix="estimate")
    futures = {executor_id: pool.submit(one, executor_id) for executor_id in executor_ids}
    wait(futures.values(), timeout=wait_seconds + 0.5)  # each call is bounded by the deadline; this is a backstop
    pool.shutdown(wait=False, cancel_futures=True)
    return {
        executor_id: future.result() if future.done() and not future.cancelled() else None
        for executor_id, future in futures.items()
    }


def cluster_estimate(estimates: dict[str, DeploymentEstimate | None]) -> ClusterEstimate | None:
    """Return the estimate of a cluster of these nodes (the slowest node's), or None for no nodes."""
    if not estimates:
        return None
    known = [estimate for estimate in estimates.values() if estimate is not None]
    unknown = len(estimates) - len(known)
    return ClusterEstimate(
        seconds=max(estimate.seconds for estimate in known) if known and not unknown else None,
        slow_nodes=sum(1 for estimate in known if estimate.slow),
        warnings=tuple(dict.fromkeys(estimate.warning for estimate in known if estimate.slow and estimate.warning)),
        unknown_nodes=unknown,
    )


def cluster_estimate_read(
    *, credential: UpstreamCredential | None, template_id: str | None, executor_ids: list[str]
) -> ClusterEstimate | None:
    """Return the estimated time to ready of these nodes on the credential's account; None without nodes."""
    return cluster_estimate(estimates_read(credential=credential, template_id=template_id, executor_ids=executor_ids))


def template_id_resolve(*, credential: UpstreamCredential | None, wanted: object = None) -> str | None:
    """Return `wanted` when it is one of the credential's cluster templates, else the newest (what an order without
    a template gets); None when the templates cannot be read now."""
    if credential is None:
        return None
    try:
        template_ids = [template.id for template in offers.cluster_templates(credential=credential)]
    except (upstream.UpstreamError, ValueError):
        return None
    return next((template_id for template_id in template_ids if template_id == wanted), next(iter(template_ids), None))


def duration_text(seconds: int | None) -> str:
    """Say a time to ready as `lium ps` does: "~18 s", "~2 min" from 90 s, "any moment now" at 0."""
    if seconds is None:
        return ""
    if seconds <= 0:
        return "any moment now"
    if seconds >= 90:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds} s"
