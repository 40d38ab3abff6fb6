"""Request and response shapes of API v1 (they also make the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr


class ErrorDetailOut(Schema):
    code: str
    message: str
    hint: str
    request_id: str


class FieldErrorOut(Schema):
    field: str
    message: str


class ErrorOut(Schema):
    success: bool = False
    error: ErrorDetailOut
    message: str
    status_code: int
    validation_errors: list[FieldErrorOut] | None = None


# Documented error answers of the fabric and rental endpoints (all use the envelope); any other status the
# API may give uses it too.
ERRORS: dict[Any, Any] = {frozenset({400, 401, 403, 404, 409, 422, 429, 502, 503}): ErrorOut}


class CustomerOut(Schema):
    id: int
    name: str


class RentalErrorOut(Schema):
    code: str
    message: str
    hint: str
    request_id: str


class AttemptOut(Schema):
    number: int
    started_at: datetime
    duration_ms: int
    http_status: int | None
    classification: str
    replayed: bool
    request_id: str
    error_code: str


class MemberOut(Schema):
    rank: int | None
    pod_id: str
    overlay_ip: str
    status: str
    phase: str
    eta_seconds: int | None
    ssh_command: str
    jupyter_url: str = Field(description="The member's Jupyter URL (http or https), or empty.")
    ports_mapping: dict[str, int] = Field(description='Container port to host port, e.g. {"22": 22001}.')


class SlowMemberOut(Schema):
    rank: int
    executor_id: str
    pod_id: str


class FabricCheckOut(Schema):
    status: str = Field(description="running, passed or failed (under the floor, or it could not measure: see error).")
    bus_bandwidth_gbps: float | None = Field(description="The all-reduce's bus bandwidth across every node, Gb/s.")
    floor_gbps: float | None = Field(description="The lowest acceptable bus bandwidth for this fabric, Gb/s.")
    slow_members: list[SlowMemberOut]
    pairs: list[dict[str, Any]] = Field(description='Pairwise figures: [{"ranks": [0, 2], "bus_bandwidth_gbps": x}].')
    error: str
    kept_unverified: bool = Field(description="The customer kept the cluster after a failed check.")
    keys_removed: bool | None = Field(description="The check's key was removed from every member (null: not run).")


class RentalOut(Schema):
    id: str
    status: str
    status_text: str
    explanation: str
    customer: CustomerOut
    customer_ref: str | None
    fabric_id: str
    executor_ids: list[str]
    pod_name: str
    idempotency_key: str
    replayed: bool = Field(
        description="Lium answered with the stored result of the first request (a replay): nothing was rented twice."
    )
    cluster_id: str | None
    removal_scheduled_at: datetime | None = Field(
        description="When every member is removed automatically; null when nothing is scheduled."
    )
    estimated_ready_seconds: int | None = Field(
        description="Lium's estimated time to ready when the order was submitted (its slowest node's); null: unknown."
    )
    ready_seconds: int | None = Field(
        description="How long the cluster took to be ready, from the first rent call; null until it is ready."
    )
    start_at: datetime | None = Field(description="When a scheduled rental is (or was) sent; null: at once.")
    created_at: datetime
    updated_at: datetime
    error: RentalErrorOut | None
    fabric_check: FabricCheckOut | None = Field(description="The fabric check of a verified rental; null: not asked.")
    attempts: list[AttemptOut]
    members: list[MemberOut]


class RentalListOut(Schema):
    items: list[RentalOut]
    next_cursor: str | None


class NodeOut(Schema):
    id: str
    machine_name: str
    gpu_count: int
    available_gpu_count: int | None
    whole: bool = Field(description="Every GPU free: only whole nodes can join a cluster.")
    price_per_gpu: str
    price_per_hour: str
    location: str
    country_code: str
    reliability_score: float | None
    max_cuda_version: str
    nvlink: bool
    gpu_power_limited: bool
    last_verified_at: str
    estimated_ready_seconds: int | None = Field(
        description="Lium's estimated time to ready on this node for the newest cluster template; null: unknown."
    )
    slow_machine: bool | None = Field(description="Lium flags this node as slow to start; null: unknown.")
    estimate_warning: str = Field(description="Lium's warning about a slow node, or empty.")


class FabricOut(Schema):
    fabric_id: str
    fabric_type: str
    link_rate: str
    measured: bool
    node_count: int
    free_count: int
    gpu_type: str
    gpus_per_node: int
    cheapest_node_hour: str | None


class FabricListOut(Schema):
    customer: CustomerOut = Field(description="Whose Lium account's offers these are.")
    fabrics: list[FabricOut]
    age_seconds: int
    cluster_renting_off_since: datetime | None = Field(
        description="Since when Lium has switched cluster renting off for this account (null: it is on); "
        "meanwhile POST /rentals answers 503 cluster_renting_disabled."
    )


class FabricNodesOut(Schema):
    customer: CustomerOut = Field(description="Whose Lium account's offers these are.")
    fabric: FabricOut
    nodes: list[NodeOut]
    age_seconds: int


CustomerId = Annotated[StrictInt, Field(ge=1, le=2_147_483_647)]
CustomerName = Annotated[StrictStr, Field(min_length=1, max_length=200)]


class RentalCreateIn(Schema):
    """A cluster order. Give `executor_ids` (the nodes you picked) or `node_count` (the N cheapest)."""

    model_config = ConfigDict(extra="forbid")

    customer: CustomerId | CustomerName | None = Field(
        None, description="Customer id or name; optional when you belong to exactly one customer."
    )
    fabric_id: Annotated[StrictStr, Field(min_length=1, max_length=300)]
    executor_ids: list[Annotated[StrictStr, Field(min_length=1, max_length=100)]] | None = Field(
        None, min_length=2, max_length=256, description="Free nodes of this fabric, each once."
    )
    node_count: Annotated[StrictInt, Field(ge=2, le=256)] | None = Field(
        None, description="Rent the N cheapest free nodes of the fabric instead of naming them."
    )
    pod_name: Annotated[StrictStr, Field(min_length=1, max_length=63)]
    ssh_public_keys: list[Annotated[StrictStr, Field(max_length=16384)]] = Field(..., min_length=1, max_length=20)
    template_id: Annotated[StrictStr, Field(min_length=1, max_length=100)] | None = Field(
        None, description="A cluster template id; empty picks the newest cluster template."
    )
    initial_port_count: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    termination_hours: Annotated[StrictInt, Field(ge=1, le=720)] | None = None
    enable_jupyter: StrictBool = False
    enable_volume_encryption: StrictBool = True
    enable_backups: StrictBool = True
    verify_fabric: StrictBool | None = Field(
        None, description="Measure the fabric over SSH before hand-over; null: the customer's default."
    )
    customer_ref: Annotated[StrictStr, Field(max_length=64)] | None = Field(
        None, description="Operators only: the X-Customer-Ref for this rental instead of the customer's."
    )
    start_at: datetime | None = Field(
        None,
        description="A scheduled start (ISO 8601 with a timezone, in the future, at most SCHEDULE_MAX_DAYS ahead): "
        "the rental waits `scheduled` and is sent then; null: now.",
    )
