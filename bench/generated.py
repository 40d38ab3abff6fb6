"""Historical rentals generated inside PostgreSQL: `INSERT ... SELECT ... FROM generate_series(...)`.

Building a million rows in Python and copying them in took about half an hour on a 2-core machine; generating
them in the server takes a few minutes. Each table's columns come from its model: the ones the bench shapes are
SQL expressions below, every other column gets the field's default (so a column added later needs no change
here unless it has no default). Rows match `bench.bulk` (the SQLite path): the same state mix, owners, refs,
members, nodes and one attempt per rental.
"""

# ruff: noqa: S608 - SQL names are model tables and columns, values are parameters
# No `%` operator in the SQL (`mod()` instead): the statements carry parameters, so `%` is a placeholder.

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.bulk import HOLDING, STATUSES, TENANT_SHARE
from bench.context import SSH_KEY

# The attempt's request id, derived from the rental id so the attempt and the rental's error column agree.
REQUEST_ID = "'req_' || substr(md5(g.n::text), 1, 16)"
DAYS_OF_HISTORY = 30


def _quoted(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


@dataclass(frozen=True)
class Param:
    """A column's value passed as a parameter rather than written as SQL."""

    value: Any


def _insert(model: Any, shaped: dict[str, str | Param], select_from: str, connection: Any) -> tuple[str, list[Any]]:
    """Return `INSERT INTO <model> (...) SELECT ...` and its parameters before `select_from`'s own.

    `shaped` columns are SQL expressions (or `Param`s); every other column gets its field's default.
    """
    columns: list[str] = []
    expressions: list[str] = []
    params: list[Any] = []
    for field in model._meta.concrete_fields:
        shape = shaped.get(field.column)
        if isinstance(shape, Param):
            expressions.append("%s")
            params.append(field.get_db_prep_save(shape.value, connection))
        elif shape is not None:
            expressions.append(shape)
        elif field.primary_key:
            continue  # the table's identity column numbers the row
        else:
            default = field.get_default()  # "" for a text field without one
            if default is None and not field.null:
                raise ValueError(f"{model.__name__}.{field.name} has no default: shape it in bench.generated")
            expressions.append("%s")
            params.append(field.get_db_prep_save(default, connection))
        columns.append(connection.ops.quote_name(field.column))
    table = connection.ops.quote_name(model._meta.db_table)
    return f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(expressions)} FROM {select_from}", params


def generate_rentals(
    *,
    start: int,
    count: int,
    customer: Any,
    credential: Any,
    user: Any,
    tenants: list[tuple[int, int, str]] | None = None,
) -> None:
    """Insert `count` historical rentals (ids start+1..) with their nodes, members and one attempt, in one transaction.

    Every TENANT_SHARE-th rental belongs to one of `tenants` (created by its user, tagged with its ref); the
    others to `customer` (created by `user`), tagged with one of 997 refs. Created at random times over the last
    30 days. No vacuum or analyze here: the caller settles the tables once, after the last chunk.
    """
    from django.db import connection, transaction

    from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt

    tenants = tenants or []
    first, last = start + 1, start + count
    # One row per rental: its number, state, creation time and owner (a tenant's index from 1, or 0).
    owner = "0"
    if tenants:  # every TENANT_SHARE-th rental, spread over all tenants (7919 is prime to their number)
        owner = (
            f"CASE WHEN mod(n, {TENANT_SHARE}) = 0 THEN 1 + mod(n / {TENANT_SHARE} * 7919, {len(tenants)}) ELSE 0 END"
        )
    series = (
        f"(SELECT n, (ARRAY[{_quoted(STATUSES)}])[mod(n, {len(STATUSES)}) + 1] AS status, "
        f"now() - random() * interval '{DAYS_OF_HISTORY} days' AS created, {owner} AS t "
        f"FROM generate_series(%s::bigint, %s::bigint) AS n) AS g"
    )
    holds = f"g.status IN ({_quoted(HOLDING)})"
    tenant_customers = "ARRAY[" + ", ".join(str(pk) for pk, _, _ in tenants) + "]::bigint[]"
    tenant_users = "ARRAY[" + ", ".join(str(pk) for _, pk, _ in tenants) + "]::integer[]"
    tenant_refs = f"ARRAY[{_quoted([ref for _, _, ref in tenants])}]::text[]" if tenants else "ARRAY[]::text[]"
    body = json.dumps({"pod_name": "x", "executor_uuids": ["a", "b"], "user_public_key": [SSH_KEY]}).encode()
    rental_sql, rental_params = _insert(
        Rental,
        {
            "id": "g.n",
            "public_id": "gen_random_uuid()",
            "fabric_id": "'hot:infiniband:0x' || to_hex(mod(g.n, 64)) || ':0x7fff:NVIDIA H100 80GB HBM3:8'",
            "executor_ids": "jsonb_build_array(gen_random_uuid()::text, gen_random_uuid()::text)",
            "pod_name": "'job-' || g.n || '-' || lpad(to_hex((random() * 65535)::int), 4, '0')",
            "customer_ref": f"CASE WHEN g.t > 0 THEN ({tenant_refs})[g.t] ELSE 'team-' || mod(g.n, 997) END",
            "gpu_type": "'NVIDIA H100'",
            "gpus_per_node": "8",
            "price_per_hour": "34.0",
            "idempotency_key": "gen_random_uuid()",
            "request_body": Param(body),
            "body_sha256": "repeat('0', 64)",
            "status": "g.status",
            "attempt_count": "1",
            "first_sent_at": "g.created",
            "last_sent_at": "g.created",
            "possibly_sent": "g.status <> 'refused'",
            "pod_ids": f"CASE WHEN {holds} THEN jsonb_build_array(gen_random_uuid()::text, "
            "gen_random_uuid()::text) ELSE '[]'::jsonb END",
            "cluster_id": f"CASE WHEN {holds} THEN gen_random_uuid()::text ELSE '' END",
            "error_code": "CASE WHEN g.status = 'refused' THEN 'executor_not_available' ELSE '' END",
            "error_request_id": f"CASE WHEN g.status IN ('refused', 'failed', 'unknown') THEN {REQUEST_ID} ELSE '' END",
            "created_at": "g.created",
            "updated_at": "g.created + interval '5 minutes'",
            "version": "4",
            "created_by_id": f"CASE WHEN g.t > 0 THEN ({tenant_users})[g.t] ELSE {int(user.pk)} END",
            "customer_id": f"CASE WHEN g.t > 0 THEN ({tenant_customers})[g.t] ELSE {int(customer.pk)} END",
            "credential_id": str(int(credential.pk)),
        },
        series,
        connection,
    )
    rentals = f"{connection.ops.quote_name(Rental._meta.db_table)} AS r"
    in_chunk = "r.id BETWEEN %s AND %s"
    node_sql, node_params = _insert(
        RentalNode,
        {"rental_id": "r.id", "executor_id": "e.value"},
        f"{rentals} CROSS JOIN LATERAL jsonb_array_elements_text(r.executor_ids) AS e WHERE {in_chunk}",
        connection,
    )
    member_sql, member_params = _insert(
        ClusterMember,
        {
            "rental_id": "r.id",
            "pod_id": "r.pod_ids ->> k",
            "rank": "k",
            "overlay_ip": "'10.42.0.' || (k + 1)",
            "status": "'RUNNING'",
            "ssh_command": "'ssh root@198.18.' || mod(r.id, 250) || '.' || k || ' -p 2200' || k",
            "executor_id": "r.executor_ids ->> k",
            "price_per_hour": "17.0",
            "gpu_count": "8",
            "first_seen_at": "r.created_at",
            "running_since": "r.created_at + interval '9 seconds'",
            "gone_at": "CASE WHEN r.status = 'terminated' THEN r.created_at + interval '3 hours' END",
            "updated_at": "r.created_at + interval '5 minutes'",
        },
        f"{rentals} CROSS JOIN generate_series(0, 1) AS k WHERE {in_chunk} AND r.pod_ids <> '[]'::jsonb",
        connection,
    )
    attempt_sql, attempt_params = _insert(
        RentAttempt,
        {
            "rental_id": "r.id",
            "number": "1",
            "started_at": "r.created_at",
            "duration_ms": "40",
            "http_status": "CASE WHEN r.status = 'refused' THEN 409 ELSE 200 END",
            "classification": "CASE WHEN r.status = 'refused' THEN 'refused' ELSE 'confirmed' END",
            "request_id": REQUEST_ID.replace("g.n", "r.id"),
        },
        f"{rentals} WHERE {in_chunk}",
        connection,
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('is_superuser') = 'on'")
        if cursor.fetchone()[0]:
            # Skip the foreign-key triggers (a third of a chunk's time, run at commit), as pg_restore
            # --disable-triggers does: every generated row points at a row that exists. Superusers only.
            cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(rental_sql, [*rental_params, first, last])
        for sql, params in ((node_sql, node_params), (member_sql, member_params), (attempt_sql, attempt_params)):
            cursor.execute(sql, [*params, first, last])


def settle(connection: Any) -> None:
    """Move the rentals' id sequence past the inserted ids, then vacuum and analyze the tables once.

    VACUUM too: autovacuum would otherwise start on the fresh rows while the pages are timed. A dashboard that
    grew to this size has had them vacuumed long ago.
    """
    from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt

    table = connection.ops.quote_name(Rental._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT COALESCE(MAX(id), 1) FROM {table}))"
        )
        for model in (Rental, RentalNode, ClusterMember, RentAttempt):
            cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


@contextmanager
def indexes_built_after(connection: Any) -> Iterator[None]:
    """Drop the bench tables' secondary indexes for a bulk insert and build them again after it (as pg_restore).

    Keeping 30 indexes in step row by row was most of an insert's time; building each once from the finished
    table is a sort. The indexes that hold a constraint (primary keys, unique columns) stay: they guard the data.
    """
    from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt

    tables = [model._meta.db_table for model in (Rental, RentalNode, ClusterMember, RentAttempt)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "WHERE i.indrelid = ANY(%s::regclass[]) "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
            [tables],
        )
        indexes = cursor.fetchall()
        for name, _definition in indexes:
            cursor.execute(f"DROP INDEX {name}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '256MB'")  # each build sorts in memory
            for _name, definition in indexes:
                cursor.execute(definition)
            cursor.execute("RESET maintenance_work_mem")
