"""Reads on rentals, always scoped to the requesting user: customers see only their own.

`X-Customer-Ref` is a label sent upstream, never an authorisation input: scope comes from memberships.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.http import Http404

from accounts.models import Customer, UpstreamCredential
from accounts.roles import is_operator, is_staff_reader
from rentals.models import ClusterMember, Rental
from rentals.states import NOT_ACTIVE_STATES, RentalStatus


def customer_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Customer]:
    """Return the customers the user may see and browse offers for (staff: every active customer)."""
    if is_staff_reader(user):
        return Customer.objects.filter(active=True)
    if not user.is_authenticated:
        return Customer.objects.none()
    return Customer.objects.filter(active=True, memberships__user_id=user.pk or 0)


def customer_list_for_renting(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Customer]:
    """Return the customers the user may rent for: operators any, members their own, support none."""
    if is_operator(user):
        return Customer.objects.filter(active=True)
    if not user.is_authenticated:
        return Customer.objects.none()
    return Customer.objects.filter(active=True, memberships__user_id=user.pk or 0)


def customer_get_named(*, customers: QuerySet[Customer], wanted: int | str) -> Customer | None:
    """Return the customer of `customers` that `wanted` names: an id, or a name (a name of digits before an id)."""
    if isinstance(wanted, int):
        return customers.filter(pk=wanted).first()
    if "\x00" in wanted:
        return None  # no name holds a NUL, and PostgreSQL refuses one in a query
    found = customers.filter(name=wanted).first()
    if found is None and wanted.isascii() and wanted.isdigit() and len(wanted) < 10:
        found = customers.filter(pk=int(wanted)).first()
    return found


def customer_credential(customer: Customer | None) -> UpstreamCredential | None:
    """Return the credential the customer's offers are read and its orders sent with: its default one, if active."""
    credential = customer.default_credential if customer is not None else None
    return credential if credential is not None and credential.active else None


def customer_for_browsing(*, user: AbstractBaseUser | AnonymousUser, wanted: int | str | None) -> Customer | None:
    """Return the customer whose offers the user browses: the one `wanted` names (id or name) among those they
    may see, else their first (None: they see none); raise `Customer.DoesNotExist` when it names none of theirs.

    Each customer's offers are its own Lium account's, read with its default credential (selected with it).
    """
    customers = customer_list_for_user(user=user).select_related("default_credential")
    if not wanted:
        return customers.first()
    found = customer_get_named(customers=customers, wanted=wanted)
    if found is None:
        raise Customer.DoesNotExist(f"{user} does not act for a customer {wanted!r}.")
    return found


def rental_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Rental]:
    """Return the rentals the user may see: staff see all, members their customers' rentals."""
    rentals = Rental.objects.select_related("customer", "credential")
    if is_staff_reader(user):
        return rentals
    if not user.is_authenticated:
        return rentals.none()
    return rentals.filter(customer__memberships__user_id=user.pk)


def rental_get_for_user(*, user: AbstractBaseUser | AnonymousUser, public_id: uuid.UUID | str) -> Rental:
    """Return one rental the user may see, or raise Http404 (never 403: its existence is not revealed)."""
    try:
        return rental_list_for_user(user=user).get(public_id=public_id)
    except (Rental.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such rental.") from exc


def customer_hourly_spend(*, customer: Customer) -> Decimal:
    """Return the USD/hour of the customer's rentals that bill or may bill (all but final and scheduled ones)."""
    total = customer_active_rentals(customer=customer).aggregate(total=Sum("price_per_hour"))["total"]
    return total or Decimal(0)


def customer_active_rentals(*, customer: Customer) -> QuerySet[Rental]:
    """Return the customer's rentals that bill or may bill: what its quotas and spend count."""
    return Rental.objects.filter(customer=customer).exclude(status__in=NOT_ACTIVE_STATES)


def customer_gpus_in_use(*, customer: Customer) -> int:
    """Return the GPUs of the customer's active rentals (GPUs per node times nodes; a few rows per customer)."""
    rows = customer_active_rentals(customer=customer).values_list("gpus_per_node", "executor_ids")
    return sum(per_node * len(nodes or []) for per_node, nodes in rows)


def rental_for_submit_token(*, user: AbstractBaseUser | AnonymousUser, token: str) -> Rental | None:
    """Return the rental this user already created with a rent form's one-time token, if any."""
    try:
        token_uuid = uuid.UUID(token)
    except ValueError:
        return None
    return Rental.objects.filter(submit_token=token_uuid, created_by_id=user.pk).first()


def members_grace() -> timedelta:
    """Return how long a `rented` rental's members may take to appear in the pod list (RENT_MEMBERS_GRACE_SECONDS)."""
    return timedelta(seconds=settings.RENT_MEMBERS_GRACE_SECONDS)


def rented_without_members(*, now: datetime) -> Q:
    """Return the filter for `rented` rentals whose members have not appeared within the grace period.

    A 2xx without pod ids or cluster id leaves the pod poller nothing to match, so such a rental would
    wait forever; it needs a look (a reconciliation).
    """
    cutoff = now - members_grace()
    has_members = Exists(ClusterMember.objects.filter(rental_id=OuterRef("pk")))
    rented_long_ago = Q(rented_at__lt=cutoff) | Q(rented_at__isnull=True, updated_at__lt=cutoff)
    return Q(status=RentalStatus.RENTED) & rented_long_ago & ~Q(has_members)


def rental_members_overdue(*, rental: Rental, now: datetime) -> bool:
    """Return whether `rented_without_members` holds for this rental at `now`.

    With its members prefetched (`prefetch_related("members")`, as lists do) no query: the rule read off the
    row and its members; otherwise one query for a `rented` rental.
    """
    if rental.status != RentalStatus.RENTED:
        return False
    prefetched = getattr(rental, "_prefetched_objects_cache", {}).get("members")
    if prefetched is None:
        return Rental.objects.filter(rented_without_members(now=now), pk=rental.pk).exists()
    due = rental_members_due_at(rental=rental)
    return due is not None and due < now and not prefetched


def rental_members_due_at(*, rental: Rental) -> datetime | None:
    """Return when a `rented` rental still without members becomes overdue by `rented_without_members`.

    Only when to look again (a page that may change by time alone); the rule itself decides.
    """
    if rental.status != RentalStatus.RENTED:
        return None
    return (rental.rented_at or rental.updated_at) + members_grace()


def rental_attention_reason(*, rental: Rental, now: datetime) -> str:
    """Return why a human should look at this rental, or "" (at most one query)."""
    if rental.status == RentalStatus.UNKNOWN:
        return "Outcome unknown: the order may have rented a cluster. Reconcile, or confirm what Lium says."
    if rental.status == RentalStatus.DEGRADED:
        return "Degraded: a member failed."
    if not rental_members_overdue(rental=rental, now=now):
        return ""
    minutes = int(members_grace().total_seconds() // 60)
    unknown_id = "" if rental.cluster_id else " and its cluster id is not known"
    return (
        f"Rented, but its members have not appeared in Lium's pod list within {minutes} min{unknown_id}: "
        "reconcile to look for the cluster."
    )
