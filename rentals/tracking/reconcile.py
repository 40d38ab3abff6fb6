"""Reconciliation: find the cluster an order may have created, and settle what the pod listing proves.

An `unknown` rental looks for itself: `rentals.transitions` schedules the first look when a rental becomes
`unknown`, each look claims its turn with a conditional UPDATE on `next_reconcile_at` (so a duplicate
message or a sweeper's copy lists nothing), and the looks stop after RECONCILE_MAX_LOOKS with backoff
(the cluster may show in `GET /pods` a little after the order). Operators run the same look by hand, also for
a `rented` rental whose members never appeared, and settle an unknown one as they decide
(`rental_confirm_reconciliation`: a cluster another rental holds is refused).

The matching rule (`rental_reconcile`). Many customers share one Lium account and a pod name like `train-1`, so
a cluster is adopted only when the match is unambiguous both ways (principle 9 in docs/architecture.md):
- a candidate is a cluster whose members all carry the order's pod name, number exactly its nodes, sit on
  exactly its executors (a pod row without an executor id matches nothing) and were created after the order;
- exactly one candidate is free: no other rental holds it or one of its pods (`rentals.tracking.holding`);
- no other unsettled rental matches it too (unknown, rented without a cluster id, or with an attempt that may
  have reached Lium, the first one in flight included), whoever its customer and on whichever credential.
Then the rental settles `rented` with the evidence ("match"). Otherwise it stays `unknown` and the finding on its
timeline lists every candidate with who holds or also matches it: "no_match" and "held" (every candidate is
another rental's) and "contested" (another unsettled order matches it) look again later; "ambiguous" (two free
candidates) waits for an operator.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from common.backoff import backoff_seconds
from rentals import upstream
from rentals.audit import staff_action_event
from rentals.engine import MAY_HAVE_REACHED_LIUM
from rentals.enqueue import pods_sync_enqueue
from rentals.models import Rental, RentalEvent
from rentals.states import HOLDS_CLUSTER_STATES, UNSETTLED_STATES, RentalStatus
from rentals.tracking.holding import ClusterHeld, held_message, holder_of, refuse_held
from rentals.transitions import rental_touch, rental_transition
from rentals.upstream.parse_pods import PodRow

logger = logging.getLogger(__name__)

# How long a look may take before another may start (one pod listing, bounded by the client's timeout).
LOOK_HELD_SECONDS = 120


def look_delay(*, looks_done: int) -> float:
    """Return seconds until the next automatic look: base, then doubling, with jitter."""
    base = settings.RECONCILE_LOOK_BASE_SECONDS
    return backoff_seconds(failures=looks_done + 1, base=base, cap=base * 2**settings.RECONCILE_MAX_LOOKS)


@dataclass(frozen=True)
class LookResult:
    # "not-due", "rented", "found" (a rented rental's cluster), "listing_failed", or a finding's other results:
    # "no_match", "held", "contested", "ambiguous" (`ReconcileFinding`).
    outcome: str
    next_in: float | None = None  # seconds until the next automatic look, when one should be enqueued


def reconcile_look_claim(*, rental_id: int) -> bool:
    """Take the unknown rental's due look; return whether this caller got it."""
    now = timezone.now()
    rows = Rental.objects.filter(pk=rental_id, status=RentalStatus.UNKNOWN, next_reconcile_at__lte=now)
    return rows.update(next_reconcile_at=now + timedelta(seconds=LOOK_HELD_SECONDS)) == 1


def rental_reconcile_look(*, rental_id: int) -> LookResult:
    """Make the unknown rental's next automatic look, if it is due."""
    if not reconcile_look_claim(rental_id=rental_id):
        return LookResult("not-due")
    rental = Rental.objects.select_related("credential").get(pk=rental_id)
    return rental_look(rental=rental, actor=None)


def rental_look(*, rental: Rental, actor: User | None) -> LookResult:
    """Look in `GET /pods` for the rental's cluster and settle what the listing proves.

    `actor` None is an automatic look (it counts against the rental's looks and schedules the next one);
    an operator's look changes no schedule.
    """
    now = timezone.now()
    automatic = actor is None
    looks = rental.reconcile_looks + (1 if automatic else 0)
    try:
        finding = rental_reconcile(rental=rental, actor=actor)
    except (upstream.UpstreamError, ValueError) as exc:
        RentalEvent.objects.create(
            rental_id=rental.pk,
            kind=RentalEvent.Kind.RECONCILE,
            actor=actor,
            message=f"Could not list Lium's pods to look for the cluster: {exc}",
            data={"result": "listing_failed", "cluster_ids": [], "checked_at": now.isoformat()},
        )
        outcome = "listing_failed"
    else:
        outcome = finding.result
        if outcome == "match":
            found = _found(
                rental=rental, actor=actor, cluster_id=finding.cluster_ids[0], evidence=finding.evidence, looks=looks
            )
            if found is not None:
                return found
            outcome = "held"  # another rental took it meanwhile
    fields: dict[str, Any] = {"last_reconcile_at": now}
    next_in = None
    if automatic and rental.status == RentalStatus.UNKNOWN:
        fields["reconcile_looks"] = looks
        # Another look may find a cluster that was not listed yet; it cannot choose between two.
        if outcome != "ambiguous" and looks < settings.RECONCILE_MAX_LOOKS:
            next_in = look_delay(looks_done=looks)
            fields["next_reconcile_at"] = now + timedelta(seconds=next_in)
        else:
            fields["next_reconcile_at"] = None
    with transaction.atomic():
        rental_touch(rental_id=rental.pk, **fields)
        if automatic and next_in is None and outcome != "ambiguous":
            RentalEvent.objects.create(
                rental_id=rental.pk,
                kind=RentalEvent.Kind.RECONCILE,
                message=(
                    f"Stopped looking after {looks} looks without a cluster this rental alone could claim. "
                    "Reconcile again by hand, ask Lium, or confirm it not rented."
                ),
                data={"result": "stopped", "looks": looks},
            )
    return LookResult(outcome, next_in=next_in)


def _found(
    *, rental: Rental, actor: User | None, cluster_id: str, evidence: dict[str, Any], looks: int
) -> LookResult | None:
    """Record the one cluster found: an unknown rental becomes `rented`, a rented one learns its cluster.

    Return None when another rental took the cluster meanwhile (the database refuses a second holder).
    """
    try:
        return _adopt(rental=rental, actor=actor, cluster_id=cluster_id, evidence=evidence, looks=looks)
    except IntegrityError:
        RentalEvent.objects.create(
            rental_id=rental.pk,
            kind=RentalEvent.Kind.RECONCILE,
            actor=actor,
            message=held_message(cluster_id=cluster_id, holder=None) + " It was taken while this look settled.",
            data={"result": "held", "cluster_ids": [], "checked_at": timezone.now().isoformat()},
        )
        return None


def _adopt(*, rental: Rental, actor: User | None, cluster_id: str, evidence: dict[str, Any], looks: int) -> LookResult:
    now = timezone.now()
    pod_ids = [str(pod_id) for pod_id in evidence.get("pod_ids", [])]
    executors = [str(executor) for executor in evidence.get("executors", [])]
    message = (
        f"Reconciliation found the cluster: {cluster_id}, pods {', '.join(pod_ids) or '—'} on executors "
        f"{', '.join(executors) or '—'}, created after the order."
    )
    data = {"cluster_id": cluster_id, "pod_ids": pod_ids, "executors": executors, "looks": looks}
    with transaction.atomic():
        if rental.status == RentalStatus.UNKNOWN:
            moved = rental_transition(
                rental_id=rental.pk,
                from_status=RentalStatus.UNKNOWN,
                to_status=RentalStatus.RENTED,
                actor=actor,
                message=message,
                data=data,
                cluster_id=cluster_id,
                pod_ids=pod_ids,
                # The outcome is known now; the old error stays on the timeline, not on the rental.
                error_code="",
                error_message="",
                error_hint="",
                last_reconcile_at=now,
                reconcile_looks=looks,
                next_reconcile_at=None,
            )
            outcome = "rented"
        elif rental.status in HOLDS_CLUSTER_STATES:
            moved = (
                Rental.objects.filter(pk=rental.pk, status=rental.status, cluster_id="").update(
                    cluster_id=cluster_id, pod_ids=pod_ids
                )
                == 1
            )
            if moved:
                rental_touch(rental_id=rental.pk, last_reconcile_at=now)
                RentalEvent.objects.create(
                    rental_id=rental.pk, kind=RentalEvent.Kind.RECONCILE, actor=actor, message=message, data=data
                )
            outcome = "found"
        else:
            return LookResult("not-due")
        if moved:
            transaction.on_commit(lambda: pods_sync_enqueue(rental.credential_id))
    return LookResult(outcome if moved else "not-due")


def rental_confirm_reconciliation(*, rental: Rental, actor: User, cluster_id: str | None, reason: str) -> bool:
    """Settle an `unknown` rental as staff decided: `rented` with a cluster, or `not_rented`.

    A cluster another rental holds is refused (ClusterHeld, a ValidationError): a cluster belongs to one rental.
    """
    if not reason.strip():
        raise ValidationError("Say why: the reason is recorded on the rental's timeline.")
    if cluster_id:
        refuse_held(cluster_id=cluster_id, rental_id=rental.pk)
        try:
            moved = rental_transition(
                rental_id=rental.pk,
                from_status=RentalStatus.UNKNOWN,
                to_status=RentalStatus.RENTED,
                # The outcome is known now; the old error stays on the timeline, not on the rental.
                error_code="",
                error_message="",
                error_hint="",
                **staff_action_event(
                    actor=actor,
                    action="confirm",
                    reason=reason,
                    message=f"Confirmed rented as cluster {cluster_id}. {reason}",
                ),
                cluster_id=cluster_id,
            )
        except IntegrityError:
            # Another rental took the cluster between the check and this write.
            refuse_held(cluster_id=cluster_id, rental_id=rental.pk)
            raise ClusterHeld(f"Cluster {cluster_id} already belongs to another rental.", code="cluster_held") from None
        if moved:
            transaction.on_commit(lambda: pods_sync_enqueue(rental.credential_id))
        return moved
    return rental_transition(
        rental_id=rental.pk,
        from_status=RentalStatus.UNKNOWN,
        to_status=RentalStatus.NOT_RENTED,
        **staff_action_event(actor=actor, action="confirm", reason=reason, message=f"Confirmed not rented. {reason}"),
    )


# --- The matching rule -----------------------------------------------------------------------------------------

# Clocks differ between us and the upstream; a cluster created this long before our row is still a candidate.
RECONCILE_CLOCK_SKEW = timedelta(minutes=5)

# Orders that may have created a cluster and hold none yet: each could be the one a listed cluster belongs to.
UNSETTLED = (
    Q(status=RentalStatus.UNKNOWN)
    | Q(status__in=HOLDS_CLUSTER_STATES, cluster_id="")
    # Any attempt that may have reached Lium, the first one still on the wire included (the engine's rule).
    | (Q(status__in=(RentalStatus.QUEUED, RentalStatus.SENDING, RentalStatus.RETRYING)) & MAY_HAVE_REACHED_LIUM)
)


@dataclass(frozen=True)
class Candidate:
    """A listed cluster that matches the order, and who else has a claim on it (public ids)."""

    cluster_id: str
    pod_ids: list[str]
    executors: list[str]
    held_by: str | None = None
    also_matches: list[str] = field(default_factory=list)

    def describe(self, rivals: dict[str, Rental]) -> str:
        """Say, for an operator, what the cluster is and who else claims it."""
        what = f"cluster {self.cluster_id} (pods {', '.join(self.pod_ids)} on executors {', '.join(self.executors)})"
        if self.held_by:
            return f"{what} belongs to rental {self.held_by} ({rivals[self.held_by].customer.name})"
        if self.also_matches:
            others = ", ".join(f"{pid} ({rivals[pid].customer.name})" for pid in self.also_matches)
            return f"{what} also matches unsettled rental {others}"
        return what


@dataclass(frozen=True)
class ReconcileFinding:
    """What a pod listing says about a rental whose cluster is not known."""

    result: str  # "match", "no_match", "held", "contested" or "ambiguous" (see the module docstring)
    cluster_ids: list[str]  # the candidates no other rental holds: what staff may confirm
    message: str
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def evidence(self) -> dict[str, Any]:
        """Return the matched cluster's pod ids and executors (what an automatic settle cites)."""
        found = next(c for c in self.candidates if c.cluster_id == self.cluster_ids[0])
        return {"pod_ids": found.pod_ids, "executors": found.executors}


def order_matches(rental: Rental, members: list[PodRow]) -> bool:
    """Return whether the listed cluster's members are exactly what the order asked for, made after it."""
    executors = [member.executor_id for member in members]
    earliest = rental.created_at - RECONCILE_CLOCK_SKEW
    return (
        len(members) == rental.node_count
        and all(member.pod_name == rental.pod_name for member in members)
        # A pod row without an executor id proves nothing about whose nodes it runs on.
        and all(executors)
        and sorted(executors) == sorted(str(executor) for executor in rental.executor_ids)
        # Members without a creation time pass: the other checks and the rivals still have to agree.
        and not any(member.created_at is not None and member.created_at < earliest for member in members)
    )


def _candidates(rental: Rental, pods: list[PodRow]) -> tuple[list[Candidate], dict[str, Rental]]:
    """Return the listed clusters matching the order, each with its holder and rivals, and those rentals by id."""
    clusters: dict[str, list[PodRow]] = defaultdict(list)
    for pod in pods:
        if pod.cluster_id:
            clusters[pod.cluster_id].append(pod)
    rivals = list(
        Rental.objects.select_related("customer")
        # On every credential: a reseller may give each customer its own credential on one Lium account.
        # `rental_unsettled_pod_name` serves this: the status list and the empty cluster id are its condition.
        .filter(UNSETTLED, status__in=UNSETTLED_STATES, cluster_id="", pod_name=rental.pod_name)
        .exclude(pk=rental.pk)
    )
    known = {str(rival.public_id): rival for rival in rivals}
    candidates = []
    for cluster_id, members in sorted(clusters.items()):
        if not order_matches(rental, members):
            continue
        pod_ids = sorted(member.id for member in members)
        holder = holder_of(cluster_id=cluster_id, pod_ids=pod_ids, other_than=rental.pk)
        if holder is not None:
            known[str(holder.public_id)] = holder
        candidates.append(
            Candidate(
                cluster_id=cluster_id,
                pod_ids=pod_ids,
                executors=sorted(member.executor_id for member in members),
                held_by=str(holder.public_id) if holder is not None else None,
                also_matches=[str(rival.public_id) for rival in rivals if order_matches(rival, members)],
            )
        )
    return candidates, known


def rental_reconcile(*, rental: Rental, actor: User | None = None) -> ReconcileFinding:
    """Look in `GET /pods` for the cluster this order may have created, and record what was found."""
    # A listing that does not parse raises (MalformedAnswer): it is never read as "no match".
    pods = upstream.client_for(rental.credential).list_pods()
    candidates, rivals = _candidates(rental, pods)
    free = [candidate for candidate in candidates if candidate.held_by is None]
    listed = "; ".join(candidate.describe(rivals) for candidate in candidates)
    if not candidates:
        result, message = "no_match", "No cluster matching this order exists upstream."
    elif not free:
        result, message = "held", f"No free cluster matches this order: {listed}. Looking again later."
    elif len(free) > 1:
        result, message = "ambiguous", f"{len(free)} free clusters match this order; an operator must choose: {listed}."
    elif free[0].also_matches:
        result = "contested"
        message = f"The one free matching cluster is not unambiguously this order's: {listed}. Looking again later."
    else:
        result, message = "match", f"Found cluster {free[0].cluster_id} matching this order."
    finding = ReconcileFinding(result, [candidate.cluster_id for candidate in free], message, candidates)
    RentalEvent.objects.create(
        rental=rental,
        kind=RentalEvent.Kind.RECONCILE,
        actor=actor,
        message=finding.message,
        data={
            "result": finding.result,
            "cluster_ids": finding.cluster_ids,
            "candidates": [asdict(candidate) for candidate in candidates],
            "checked_at": timezone.now().isoformat(),
        },
    )
    return finding
