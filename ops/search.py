"""Support search: find rentals from whatever identifier a customer gives support, in a few statements.

Every identifier kind that could match the text is one *lookup*: the ids of at most `PER_LOOKUP` matching
rentals, read off one index. All lookups run as one `UNION ALL` of ORM querysets that returns (lookup, rental
id) newest first, so a search costs the same queries at a thousand rentals or a million: the customers and the
users named by the text, the union, and the page's rows by primary key.

- Exact ids (rental id, idempotency key, pod id, cluster id, request id) match a handful of rows each; an executor
  id (a node is rented again and again) and an overlay IP (clusters reuse their private addresses) can match
  many: their lookups read the newest, off an (id, rental) index.
- A customer ref, a customer and a user can each match many rentals: their lookups read the newest first,
  straight off a (key, -created_at) index, whatever the table's size; several customers (a name prefix) or users
  (an e-mail) are one lookup per owner, merged by the union's order.
- Prefixes (pod name, customer ref; at least `PREFIX_MIN_LENGTH` characters) use the `varchar_pattern_ops`
  indexes Django adds for indexed CharFields on PostgreSQL. They stop after `PER_LOOKUP` matches without
  sorting every match, so for a prefix shared by many rentals these are some of its rentals, not the newest.

Each lookup's `LIMIT` sits in an `id IN (...)` subquery rather than on the union's arm: SQLite refuses a `LIMIT`
on an arm of a compound statement, and PostgreSQL plans the subquery as a semi-join off the same index.
"""

from __future__ import annotations

import ipaddress
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db.models import IntegerField, Model, Q, QuerySet, Value
from django.utils import timezone

from accounts.models import Customer
from rentals.models import STATUS_LABELS, ClusterMember, Rental, RentalNode, RentAttempt
from rentals.states import FINAL_STATES

SEARCH_RESULTS = 50
# One more than a page: enough to fill the page from any one lookup and to know that there is more.
PER_LOOKUP = SEARCH_RESULTS + 1
PREFIX_MIN_LENGTH = 3
MAX_QUERY_LENGTH = 200
# A name prefix can match many customers (and an e-mail several users): merge the newest of at most these.
CUSTOMERS_PER_SEARCH = 20
USERS_PER_SEARCH = 20

# Identifier kinds: when the search finds a single rental by one of them, it jumps to that rental (an executor id
# or an overlay IP may name many rentals; then they are listed).
EXACT_KINDS = frozenset(
    {"rental id", "idempotency key", "pod id", "cluster id", "request id", "overlay IP", "executor id"}
)


@dataclass
class SearchRow:
    """One rental as the results table shows it: plain values, read without building model instances."""

    pk: int
    public_id: uuid.UUID
    pod_name: str
    status: str
    status_label: str
    customer_name: str
    customer_ref: str  # "—" when none: the table's cells are ready to print (a template filter per cell costs)
    created_by: str
    created: str  # when it was created, to the minute (UTC)
    found_by: str  # the identifier kinds that matched, "pod name, customer ref"
    removal_at: datetime | None = None  # a scheduled removal still to come (none once the rental is final)
    url: str = ""  # set by the view


@dataclass
class SearchResult:
    query: str
    rentals: list[SearchRow] = field(default_factory=list)
    # How each rental was found: rental pk -> the identifier kinds that matched.
    matched: dict[int, list[str]] = field(default_factory=dict)
    # The single rental an exact identifier points at: the view jumps straight to it.
    exact: SearchRow | None = None
    truncated: bool = False


@dataclass(frozen=True)
class Lookup:
    """One identifier kind's read: the ids of the rentals it matches (a `values()` queryset), newest first."""

    kind: str
    rental_ids: QuerySet[Any, Any]


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _rentals(kind: str, where: Q, *, newest_first: bool = False) -> Lookup:
    rentals = Rental.objects.filter(where)
    return Lookup(kind, (rentals.order_by("-created_at") if newest_first else rentals.order_by()).values("pk"))


def _children(kind: str, model: type[Model], *, newest_first: bool = False, **where: str) -> Lookup:
    """A match on a table that belongs to a rental (members, nodes, attempts): the rental's id.

    `newest_first` for a value many rentals share: the highest rental ids (the newest rentals) off a (column,
    rental) index, instead of whichever rows the index or the table lists first (the oldest).
    """
    rows = model._default_manager.filter(**where)
    return Lookup(kind, (rows.order_by("-rental_id") if newest_first else rows.order_by()).values("rental_id"))


def search_owners(text: str) -> tuple[list[int], list[int]]:
    """Return the customers named by `text` (name prefix, any case, or exact ref) and the users (username, or
    e-mail in any case): at most `CUSTOMERS_PER_SEARCH` and `USERS_PER_SEARCH`."""
    customers = Customer.objects.filter(Q(name__istartswith=text) | Q(customer_ref=text)).order_by("name")
    users = User.objects.filter(Q(username=text) | Q(email__iexact=text) if "@" in text else Q(username=text))
    return (
        list(customers.values_list("pk", flat=True)[:CUSTOMERS_PER_SEARCH]),
        list(users.order_by("pk").values_list("pk", flat=True)[:USERS_PER_SEARCH]),
    )


def search_lookups(text: str) -> list[Lookup]:
    """Return one lookup per identifier kind that could match `text`, and one per customer and user it names."""
    lookups: list[Lookup] = []
    as_uuid = _as_uuid(text)
    if as_uuid is not None:
        lookups.append(_rentals("rental id", Q(public_id=as_uuid)))
        lookups.append(_rentals("idempotency key", Q(idempotency_key=as_uuid)))
    if _is_ip(text):
        lookups.append(_children("overlay IP", ClusterMember, overlay_ip=text, newest_first=True))
    lookups += [
        _children("pod id", ClusterMember, pod_id=text),
        _rentals("cluster id", Q(cluster_id=text)),
        _children("executor id", RentalNode, executor_id=text, newest_first=True),
        _children("executor id", ClusterMember, executor_id=text, newest_first=True),
        _rentals("request id", Q(error_request_id=text)),
        _children("request id", RentAttempt, request_id=text),
        _rentals("customer ref", Q(customer_ref=text), newest_first=True),
    ]
    if len(text) >= PREFIX_MIN_LENGTH:
        lookups.append(_rentals("pod name", Q(pod_name__startswith=text)))
        lookups.append(_rentals("customer ref", Q(customer_ref__startswith=text)))
    else:
        lookups.append(_rentals("pod name", Q(pod_name=text)))
    customers, users = search_owners(text)
    lookups += [_rentals("customer", Q(customer_id=pk), newest_first=True) for pk in customers]
    lookups += [_rentals("user", Q(created_by_id=pk), newest_first=True) for pk in users]
    return lookups


def _found(lookups: list[Lookup]) -> list[tuple[int, int]]:
    """Return (lookup index, rental id) for at most PER_LOOKUP rentals per lookup, newest rental first."""
    arms = [
        Rental.objects.filter(pk__in=lookup.rental_ids[:PER_LOOKUP])
        .order_by()
        .values_list(Value(index, output_field=IntegerField()), "pk", "created_at")
        for index, lookup in enumerate(lookups)
    ]
    union = arms[0].union(*arms[1:], all=True).order_by("-created_at", "-pk")
    return [(index, pk) for index, pk, _created_at in union]


def _page_rows(pks: list[int]) -> QuerySet[Any, Any]:
    """The table's columns for rentals `pks`, newest first."""
    return (
        Rental.objects.filter(pk__in=pks)
        .order_by("-created_at", "-pk")
        .values_list(
            "pk",
            "public_id",
            "pod_name",
            "status",
            "customer__name",
            "customer_ref",
            "created_by__username",
            "created_at",
            "removal_scheduled_at",
        )
    )


def rental_search(*, text: str) -> SearchResult:
    """Find rentals by any identifier support is given: the newest `SEARCH_RESULTS`, and how each was found."""
    text = text.strip()
    result = SearchResult(query=text)
    if not text or len(text) > MAX_QUERY_LENGTH:
        return result
    lookups = search_lookups(text)
    # Newest first already: the first SEARCH_RESULTS distinct rentals are the page.
    for index, pk in _found(lookups):
        kinds = result.matched.setdefault(pk, [])
        if lookups[index].kind not in kinds:
            kinds.append(lookups[index].kind)
    if not result.matched:
        return result
    result.truncated = len(result.matched) > SEARCH_RESULTS
    newest = list(result.matched)[:SEARCH_RESULTS]
    result.rentals = [
        SearchRow(
            pk=pk,
            public_id=public_id,
            pod_name=pod_name,
            status=status,
            status_label=STATUS_LABELS.get(status, status),
            customer_name=customer_name,
            customer_ref=customer_ref or "—",
            created_by=created_by or "—",
            created=timezone.localtime(created_at).strftime("%Y-%m-%d %H:%M"),
            found_by=", ".join(result.matched[pk]),
            removal_at=None if status in FINAL_STATES else removal_at,
        )
        for pk, public_id, pod_name, status, customer_name, customer_ref, created_by, created_at, removal_at in (
            _page_rows(newest)
        )
    ]
    if len(result.rentals) == 1 and set(result.matched[result.rentals[0].pk]) & EXACT_KINDS:
        result.exact = result.rentals[0]
    return result
