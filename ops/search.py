"""Support search: find rentals from whatever identifier a customer gives support, in one union statement.

Every identifier kind that could match the text is one *lookup*: a read of at most `PER_LOOKUP` entries of one
index. All lookups run as one `UNION ALL` statement that returns (lookup, rental id) newest first, so a search
costs the same two queries at a thousand rentals or a million: the union (the customers and the users named by
the text are ORM subqueries inside it) and the page's rows by primary key (ORM).

- Exact ids (rental id, idempotency key, pod id, cluster id, request id) match a handful of rows each; an executor
  id (a node is rented again and again) and an overlay IP (clusters reuse their private addresses) can match
  many: their lookups read the newest, off an (id, rental) index.
- A customer ref, a customer and a user can each match many rentals: their lookups read the newest first,
  straight off a (key, -created_at) index, whatever the table's size. Several customers (a name prefix) or
  users (an e-mail) are one lookup that merges each one's newest.
- Prefixes (pod name, customer ref; at least `PREFIX_MIN_LENGTH` characters) use the `varchar_pattern_ops`
  indexes Django adds for indexed CharFields on PostgreSQL. They stop after `PER_LOOKUP` matches without
  sorting every match, so for a prefix shared by many rentals these are some of its rentals, not the newest.

The union is the one statement written out (`_found`): the same union composed of querysets (each lookup's `LIMIT`
in an `id IN` subquery, as SQLite refuses one on a union's arm) cost 8-10 ms more CPU per search than running it,
and tripled the search's p95 through gunicorn (bench/README.md). It is portable SQL (a `LIMIT` inside each derived
table, an `ORDER BY` on the union), run on SQLite and PostgreSQL by the tests, but for the newest rentals of
several owners, which PostgreSQL plans far cheaper as a `LATERAL` read (`_newest_of`).
"""

from __future__ import annotations

import ipaddress
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from django.contrib.auth.models import User
from django.db import connection, models
from django.db.models import Q, QuerySet

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


class SearchRow(TypedDict):
    """One rental as the results table shows it: plain values, read without building model instances.

    A dict, not an object: the template engine tries a key before an attribute, so each of the page's 350 cells
    is found at the first try (about 0.5 ms of a 50-row search, bench/README.md).
    """

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
    removal_at: datetime | None  # a scheduled removal still to come (none once the rental is final)
    url: str  # set by the view


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
    """One identifier kind's read: SQL that selects (`id`, `created_at`) of matching rentals, and its parameters.

    A lookup on a table that belongs to a rental (`child`) selects `rental_id` only: `_union` joins all of them
    to the rentals at once.
    """

    kind: str
    sql: str
    params: tuple[Any, ...]
    child: bool = False


def _table(model: type[Any]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


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


def _rental_lookup(kind: str, where: str, *params: Any, newest_first: bool = False) -> Lookup:
    order = " ORDER BY created_at DESC" if newest_first else ""
    sql = f"SELECT id, created_at FROM {_table(Rental)} WHERE {where}{order}"  # noqa: S608 - our columns; values are parameters
    return Lookup(kind, sql, params)


def _child_lookup(kind: str, model: type[Any], column: str, value: str, *, newest_first: bool = False) -> Lookup:
    """A match on a table that belongs to a rental (members, nodes, attempts): the rental's id.

    `newest_first` for a value many rentals share: the highest rental ids (the newest rentals) off a (column,
    rental) index, instead of whichever rows the index or the table lists first (the oldest).
    """
    order = " ORDER BY rental_id DESC" if newest_first else ""
    sql = f"SELECT rental_id FROM {_table(model)} WHERE {column} = %s{order}"  # noqa: S608 - as above
    return Lookup(kind, sql, (value,), child=True)


def _uuid_param(field_name: str, value: uuid.UUID) -> Any:
    # A uuid column on PostgreSQL, 32 hex characters on SQLite: the field knows which.
    uuid_field = Rental._meta.get_field(field_name)
    assert isinstance(uuid_field, models.UUIDField)
    return uuid_field.get_db_prep_value(value, connection)


def _owners(text: str) -> tuple[QuerySet[Any, Any], QuerySet[Any, Any]]:
    """Return the customers named by `text` (name prefix, any case, or exact ref) and the users (username, or
    e-mail in any case), at most `CUSTOMERS_PER_SEARCH` and `USERS_PER_SEARCH`, as subqueries of their pks."""
    customers = Customer.objects.filter(Q(name__istartswith=text) | Q(customer_ref=text)).order_by("name")
    users = User.objects.filter(Q(username=text) | Q(email__iexact=text) if "@" in text else Q(username=text))
    return (
        customers.values("pk")[:CUSTOMERS_PER_SEARCH],
        users.order_by("pk").values("pk")[:USERS_PER_SEARCH],
    )


def search_lookups(text: str) -> list[Lookup]:
    """Return one lookup per identifier kind that could match `text` (the named customers and users: one each)."""
    lookups: list[Lookup] = []
    as_uuid = _as_uuid(text)
    if as_uuid is not None:
        lookups.append(_rental_lookup("rental id", "public_id = %s", _uuid_param("public_id", as_uuid)))
        lookups.append(
            _rental_lookup("idempotency key", "idempotency_key = %s", _uuid_param("idempotency_key", as_uuid))
        )
    if _is_ip(text):
        lookups.append(_child_lookup("overlay IP", ClusterMember, "overlay_ip", text, newest_first=True))
    lookups += [
        _child_lookup("pod id", ClusterMember, "pod_id", text),
        _rental_lookup("cluster id", "cluster_id = %s", text),
        _child_lookup("executor id", RentalNode, "executor_id", text, newest_first=True),
        _child_lookup("executor id", ClusterMember, "executor_id", text, newest_first=True),
        _rental_lookup("request id", "error_request_id = %s", text),
        _child_lookup("request id", RentAttempt, "request_id", text),
        _rental_lookup("customer ref", "customer_ref = %s", text, newest_first=True),
    ]
    if len(text) >= PREFIX_MIN_LENGTH:
        # The backend's own LIKE (with its escape clause), on the text with its wildcards escaped.
        like = connection.operators["startswith"]
        prefix = connection.ops.prep_for_like_query(text) + "%"
        lookups.append(_rental_lookup("pod name", f"pod_name {like}", prefix))
        lookups.append(_rental_lookup("customer ref", f"customer_ref {like}", prefix))
    else:
        lookups.append(_rental_lookup("pod name", "pod_name = %s", text))
    customers, users = _owners(text)
    lookups.append(_newest_of("customer", "customer_id", customers))
    lookups.append(_newest_of("user", "created_by_id", users))
    return lookups


def _newest_of(kind: str, column: str, owners: QuerySet[Any, Any]) -> Lookup:
    """One lookup for the newest rentals of several customers (or users), merged from each one's own index.

    `owners` (a queryset of pks) is a subquery of the union, not a query of its own: two round trips fewer for
    every search. On PostgreSQL one `LATERAL` read per owner, each owner's newest straight off its (owner,
    -created_at) index, which an `IN (owners)` could not read in order: a name prefix naming 20 customers cost 0.2 ms
    to plan and 0.8 ms to run at a million rentals (index-only, `PER_LOOKUP` entries per customer). SQLite has no
    `LATERAL` (and the embedded default, no million rentals): `IN (owners)`, sorted newest first.
    """
    owners_sql, owners_params = owners.query.sql_with_params()
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT r.id, r.created_at FROM ({owners_sql}) AS o(owner) CROSS JOIN LATERAL "  # noqa: S608 - our columns
            f"(SELECT id, created_at FROM {_table(Rental)} WHERE {column} = o.owner "
            f"ORDER BY created_at DESC LIMIT {PER_LOOKUP}) AS r ORDER BY r.created_at DESC"
        )
    else:
        sql = (
            f"SELECT id, created_at FROM {_table(Rental)} WHERE {column} IN ({owners_sql}) "  # noqa: S608 - as above
            "ORDER BY created_at DESC"
        )
    return Lookup(kind, sql, tuple(owners_params))


def _union(lookups: list[Lookup]) -> tuple[str, list[Any]]:
    """Return one statement yielding (lookup index, rental id), newest rental first, at most PER_LOOKUP per lookup.

    The child lookups are joined to the rentals once, as one group: planning a join per lookup cost about a
    quarter of a millisecond each, most of the statement's planning.
    """
    parts: list[str] = []
    params: list[Any] = []
    child_parts: list[str] = []
    child_params: list[Any] = []
    for index, lookup in enumerate(lookups):
        # The index is our own integer, not input; the LIMIT sits inside the derived table so it is per lookup.
        columns = "rental_id" if lookup.child else "id, created_at"
        arm = f"SELECT {index} AS lookup, {columns} FROM ({lookup.sql} LIMIT {PER_LOOKUP}) AS l{index}"  # noqa: S608
        (child_parts if lookup.child else parts).append(arm)
        (child_params if lookup.child else params).extend(lookup.params)
    if child_parts:
        parts.append(
            f"SELECT c.lookup, c.rental_id AS id, r.created_at FROM ({' UNION ALL '.join(child_parts)}) AS c "  # noqa: S608 - as above
            f"JOIN {_table(Rental)} r ON r.id = c.rental_id"
        )
        params += child_params
    # Ordered outside the union, so the rows bring no timestamp to parse: about a millisecond of a search's CPU.
    union = " UNION ALL ".join(parts)
    return f"SELECT lookup, id FROM ({union}) AS found ORDER BY created_at DESC, id DESC", params  # noqa: S608


def _found(lookups: list[Lookup]) -> list[tuple[int, int]]:
    """Return (lookup index, rental id) for at most `PER_LOOKUP` rentals per lookup, newest rental first."""
    # Written out for the search's worst p95 <= 20 ms at 1,000,000 rentals: the same union composed of querysets
    # cost 8-10 ms more CPU per search (a dozen querysets built and compiled) than it costs PostgreSQL to run.
    sql, params = _union(lookups)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(index, pk) for index, pk in cursor.fetchall()]


def _page_rows(pks: list[int]) -> QuerySet[Any, Any]:
    """The table's columns for rentals `pks`, newest first."""
    columns = ("pk", "public_id", "pod_name", "status", "customer__name", "customer_ref", "created_by__username")
    rentals = Rental.objects.filter(pk__in=pks).order_by("-created_at", "-pk")
    return rentals.values_list(*columns, "created_at", "removal_scheduled_at")


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
            created=created_at.strftime("%Y-%m-%d %H:%M"),  # read as UTC, the project's only time zone
            found_by=", ".join(result.matched[pk]),
            removal_at=None if status in FINAL_STATES else removal_at,
            url="",
        )
        for pk, public_id, pod_name, status, customer_name, customer_ref, created_by, created_at, removal_at in (
            _page_rows(newest)
        )
    ]
    if len(result.rentals) == 1 and set(result.matched[result.rentals[0]["pk"]]) & EXACT_KINDS:
        result.exact = result.rentals[0]
    return result
