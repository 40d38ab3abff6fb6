"""Who holds an upstream object: a cluster or a pod belongs to at most one rental.

Many customers share one Lium account, so a cluster id or a pod id in a listing proves nothing about whose it
is. The database refuses a second holder (`unique_rental_cluster`, unique `ClusterMember.pod_id`); every writer
that adopts one asks here first, for a clear message, and treats the IntegrityError of a race as the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError

from rentals.models import ClusterMember, Rental


class ClusterHeld(ValidationError):
    """The cluster (or one of its pods) already belongs to another rental."""


def cluster_holder(*, cluster_id: str, other_than: int | None = None) -> Rental | None:
    """Return the rental that holds `cluster_id`, other than rental `other_than`, if any."""
    if not cluster_id:
        return None
    rentals = Rental.objects.select_related("customer").filter(cluster_id=cluster_id)
    if other_than is not None:
        rentals = rentals.exclude(pk=other_than)
    return rentals.first()


def pods_holder(*, pod_ids: Iterable[str], other_than: int | None = None) -> Rental | None:
    """Return a rental, other than `other_than`, that has one of `pod_ids` as a member, if any."""
    members = ClusterMember.objects.select_related("rental__customer").filter(pod_id__in=list(pod_ids))
    if other_than is not None:
        members = members.exclude(rental_id=other_than)
    member = members.first()
    return member.rental if member is not None else None


def holder_of(*, cluster_id: str, pod_ids: Iterable[str] = (), other_than: int | None = None) -> Rental | None:
    """Return the rental other than `other_than` that holds the cluster or one of its pods, if any."""
    return cluster_holder(cluster_id=cluster_id, other_than=other_than) or pods_holder(
        pod_ids=pod_ids, other_than=other_than
    )


def held_message(*, cluster_id: str, holder: Rental | None, pod_ids: Iterable[str] = ()) -> str:
    """Say, for staff, that the cluster (or, without its id, its pods) belongs to another rental."""
    whose = f"rental {holder.public_id} ({holder.customer.name})" if holder is not None else "another rental"
    if not cluster_id:
        return f"Pods {', '.join(pod_ids)} already belong to {whose}: a pod belongs to one rental only."
    return f"Cluster {cluster_id} already belongs to {whose}: a cluster belongs to one rental only."


def refuse_held(*, cluster_id: str, rental_id: int) -> None:
    """Raise ClusterHeld when another rental holds `cluster_id`."""
    holder = cluster_holder(cluster_id=cluster_id, other_than=rental_id)
    if holder is not None:
        raise ClusterHeld(held_message(cluster_id=cluster_id, holder=holder), code="cluster_held")
