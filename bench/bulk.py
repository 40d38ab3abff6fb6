"""Bulk historical rentals on SQLite (rows built in Python, `executemany`), and what both databases share.

PostgreSQL generates its rows in the server (`bench.generated`). Both paths make the same data; the search
samples are read back from the rows afterwards (`search_samples`)."""

# ruff: noqa: S608 - SQL names are model tables, not input

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.context import SSH_KEY


class Bulk:
    """Fast inserts of model rows on SQLite (`executemany`), values converted per column."""

    def __init__(self, model: Any, connection: Any) -> None:
        from django.db import models

        self.model = model
        self.connection = connection
        # Only rentals get explicit ids (their children point at them); the children's ids come from the database.
        self.fields = [f for f in model._meta.concrete_fields if not (f.primary_key and model.__name__ != "Rental")]
        self.columns = [f.column for f in self.fields]
        self.convert: list[Callable[[Any], Any]] = []
        for f in self.fields:
            if isinstance(f, models.UUIDField):
                self.convert.append(lambda v: None if v is None else v.hex)
            elif isinstance(f, models.DateTimeField):
                self.convert.append(lambda v: None if v is None else v.replace(tzinfo=None).isoformat(" "))
            elif isinstance(f, models.JSONField):
                self.convert.append(json.dumps)
            elif isinstance(f, models.DecimalField):
                self.convert.append(lambda v: None if v is None else str(v))
            elif isinstance(f, models.BooleanField):
                self.convert.append(int)
            else:
                self.convert.append(lambda v: v)
        self.rows: list[tuple] = []

    def add(self, values: dict[str, Any]) -> None:
        """Queue one row; a column `values` leaves out gets the field's default (None when it has none)."""
        row = (values[f.attname] if f.attname in values else f.get_default() for f in self.fields)
        self.rows.append(tuple(conv(value) for value, conv in zip(row, self.convert, strict=True)))
        if len(self.rows) >= 20000:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        table = self.model._meta.db_table
        cols = ", ".join(f'"{c}"' for c in self.columns)
        marks = ", ".join("?" for _ in self.columns)
        self.connection.connection.executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', self.rows)
        self.rows = []


BENCH_TENANTS = 400  # other customers (with a user each) that hold one rental in TENANT_SHARE
TENANT_SHARE = 4


def bench_tenants(credential: Any) -> list[tuple[int, int, str]]:
    """Create (once) the other customers of the bulk data, each with its own user: [(customer pk, user pk, ref)].

    Support search needs realistic data: many customers whose names share a prefix ("Bench Tenant 01" matches
    ten of them), refs shared by hundreds of rentals, users whose e-mail is stored in mixed case.
    """
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User

    from accounts.models import Customer

    names = [f"Bench Tenant {i:03d}" for i in range(BENCH_TENANTS)]
    if not Customer.objects.filter(name=names[0]).exists():
        Customer.objects.bulk_create(
            Customer(name=name, customer_ref=f"tenant-{i:03d}", default_credential=credential)
            for i, name in enumerate(names)
        )
        User.objects.bulk_create(
            User(
                username=f"bench-tenant-{i:03d}",
                email=f"Ops+{i:03d}@Tenant{i:03d}.invalid",
                password=make_password(None),
            )
            for i in range(BENCH_TENANTS)
        )
    customers = dict(Customer.objects.filter(name__in=names).values_list("name", "pk"))
    users = dict(User.objects.filter(username__startswith="bench-tenant-").values_list("username", "pk"))
    return [(customers[name], users[f"bench-tenant-{i:03d}"], f"tenant-{i:03d}") for i, name in enumerate(names)]


STATUSES = (
    ["terminated"] * 70
    + ["ready"] * 12
    + ["refused"] * 6
    + ["failed"] * 4
    + ["cancelled"] * 3
    + ["degraded"] * 2
    + ["unknown"] * 1
    + ["not_rented"] * 2
)
HOLDING = ("terminated", "ready", "degraded")
SAMPLE_KINDS = (
    "rental id",
    "idempotency key",
    "pod id",
    "cluster id",
    "executor id",
    "request id",
    "pod name",
    "customer ref",
)
SAMPLES = 400  # rentals read back for the search samples, spread over the inserted ids


def bulk_rentals(
    *,
    start: int,
    count: int,
    customer: Any,
    credential: Any,
    user: Any,
    tenants: list[tuple[int, int, str]] | None = None,
) -> None:
    """Insert `count` historical rentals (ids start+1..) with nodes, members and one attempt each (SQLite).

    Every TENANT_SHARE-th rental belongs to one of `tenants` (created by its user, tagged with its ref); the
    others to `customer` (created by `user`), tagged with one of 997 refs (so a ref is shared by ~N/1330 rentals).
    """
    import random

    from django.db import connection, transaction

    from rentals.models import ClusterMember, Rental, RentalNode, RentAttempt

    rng = random.Random(start)  # noqa: S311 - reproducible data, not crypto
    now = datetime.now(UTC)
    tables = [Bulk(m, connection) for m in (Rental, RentalNode, ClusterMember, RentAttempt)]
    rentals, nodes, members, attempts = tables
    base = rental_defaults(customer=customer, credential=credential, user=user)
    with transaction.atomic():
        for n in range(start + 1, start + count + 1):
            row = historical_rental(n, rng=rng, now=now, tenants=tenants)
            rentals.add({**base, **row})
            for executor_id in row["executor_ids"]:
                nodes.add({"rental_id": n, "executor_id": executor_id})
            for rank, pod_id in enumerate(row["pod_ids"]):
                members.add(member_row(row, rank, pod_id))
            attempts.add(attempt_row(row))
        for table in tables:
            table.flush()


def rental_defaults(*, customer: Any, credential: Any, user: Any) -> dict[str, Any]:
    """Return the columns every bulk rental shares."""
    body = json.dumps({"pod_name": "x", "executor_uuids": ["a", "b"], "user_public_key": [SSH_KEY]}).encode()
    return {
        "created_by_id": user.pk,
        "customer_id": customer.pk,
        "credential_id": credential.pk,
        "gpu_type": "NVIDIA H100",
        "gpus_per_node": 8,
        "price_per_hour": "34.0000",
        "submit_token": None,
        "request_body": body,
        "body_sha256": "0" * 64,
        "next_attempt_at": None,
        "lease_until": None,
        "lease_token": None,
        "error_message": "",
        "error_hint": "",
        "replayed": False,
        "removal_scheduled_at": None,
        "attempt_count": 1,
        "version": 4,
    }


def historical_rental(n: int, *, rng: Any, now: datetime, tenants: list[tuple[int, int, str]] | None) -> dict[str, Any]:
    """Return rental `n`'s own columns, drawn from `rng` (always in the same order: the data is reproducible)."""
    status = STATUSES[n % len(STATUSES)]
    created = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
    executor_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(2)]
    holds = status in HOLDING
    cluster_id = str(uuid.uuid4()) if holds else ""
    pod_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(2)] if holds else []
    request_id = f"req_{rng.getrandbits(64):016x}"
    pod_name = f"job-{n}-{rng.getrandbits(16):04x}"
    owner = {}
    if tenants and n % TENANT_SHARE == 0:
        customer_pk, user_pk, ref = tenants[rng.randrange(len(tenants))]
        owner = {"customer_id": customer_pk, "created_by_id": user_pk}
    else:
        ref = f"team-{n % 997}"
    return {
        **owner,
        "id": n,
        "public_id": uuid.UUID(int=rng.getrandbits(128), version=4),
        "fabric_id": f"hot:infiniband:0x{n % 64:x}:0x7fff:NVIDIA H100 80GB HBM3:8",
        "executor_ids": executor_ids,
        "pod_name": pod_name,
        "customer_ref": ref,
        "idempotency_key": uuid.UUID(int=rng.getrandbits(128), version=4),
        "status": status,
        "first_sent_at": created,
        "last_sent_at": created,
        "possibly_sent": status != "refused",
        "pod_ids": pod_ids,
        "cluster_id": cluster_id,
        "error_code": "executor_not_available" if status == "refused" else "",
        "error_request_id": request_id if status in ("refused", "failed", "unknown") else "",
        "request_id": request_id,  # the attempt's column: Bulk reads only the rental's own fields
        "created_at": created,
        "updated_at": created + timedelta(minutes=5),
    }


def member_row(rental: dict[str, Any], rank: int, pod_id: str) -> dict[str, Any]:
    """Return the cluster member of `rental` at `rank` (running since nine seconds after the rent)."""
    n, created = rental["id"], rental["created_at"]
    return {
        "rental_id": n,
        "pod_id": pod_id,
        "rank": rank,
        "overlay_ip": f"10.42.0.{rank + 1}",
        "status": "RUNNING",
        "phase": "",
        "eta_seconds": None,
        "ssh_command": f"ssh root@198.18.{n % 250}.{rank} -p 2200{rank}",
        "executor_id": rental["executor_ids"][rank],
        "price_per_hour": "17.0000",
        "gpu_count": 8,
        "first_seen_at": created,
        "running_since": created + timedelta(seconds=9),
        "gone_at": created + timedelta(hours=3) if rental["status"] == "terminated" else None,
        "updated_at": created + timedelta(minutes=5),
    }


def attempt_row(rental: dict[str, Any]) -> dict[str, Any]:
    """Return the one attempt of `rental`: refused or confirmed."""
    refused = rental["status"] == "refused"
    return {
        "rental_id": rental["id"],
        "number": 1,
        "started_at": rental["created_at"],
        "duration_ms": 40,
        "http_status": 409 if refused else 200,
        "classification": "refused" if refused else "confirmed",
        "error_code": "",
        "message": "",
        "replayed": False,
        "request_id": rental["request_id"],
    }


def search_samples(*, first: int, last: int) -> dict[str, list[str]]:
    """Read back the identifiers of `SAMPLES` rentals spread over ids first..last, one list per identifier kind."""
    from rentals.models import Rental, RentAttempt

    step = max(1, (last - first + 1) // SAMPLES)
    ids = list(range(first, last + 1, step))
    samples: dict[str, list[str]] = {kind: [] for kind in SAMPLE_KINDS}
    request_ids = dict(RentAttempt.objects.filter(rental_id__in=ids, number=1).values_list("rental_id", "request_id"))
    rows = Rental.objects.filter(pk__in=ids).order_by("pk")
    for pk, public_id, key, executor_ids, pod_name, ref, status, pod_ids, cluster_id in rows.values_list(
        "pk",
        "public_id",
        "idempotency_key",
        "executor_ids",
        "pod_name",
        "customer_ref",
        "status",
        "pod_ids",
        "cluster_id",
    ):
        samples["rental id"].append(str(public_id))
        samples["idempotency key"].append(str(key))
        samples["request id"].append(request_ids[pk])
        samples["executor id"].append(executor_ids[0])
        samples["pod name"].append(pod_name.rsplit("-", 1)[0])  # a prefix: "job-<n>" of "job-<n>-<hex>"
        samples["customer ref"].append(ref or "")
        if status in HOLDING:
            samples["pod id"].append(pod_ids[0])
            samples["cluster id"].append(cluster_id)
    return samples
