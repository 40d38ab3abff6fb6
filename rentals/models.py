"""Rentals: the order row (the truth), its upstream attempts, its cluster members and its timeline."""

import uuid

from django.conf import settings
from django.db import models

from accounts.models import Customer, UpstreamCredential
from rentals.states import ATTENTION_STATES, FINAL_STATES, IN_FLIGHT_STATES, UNSETTLED_STATES, RentalStatus

STATUS_LABELS: dict[str, str] = dict(RentalStatus.choices)


def error_from_lium(request_id: str | None) -> bool:
    """Return whether a rental's error is Lium's own answer, by its source: Lium's answers always carry a request
    id (`error.request_id` in the body or the `X-Request-Id` header), the dashboard's own words (a member removed
    outside it, Lium not reached, a scheduled or held order refused before sending) never do. One exception: a 2xx
    answer that cannot be read keeps Lium's request id under the dashboard's description of it. The one rule behind
    "Lium said:" (else "Why:") on the rental's page (`Rental.error_from_lium`) and in its e-mails (from the
    rental's JSON, `notifications.delivery`); whether the order was ever sent does not say who wrote the error."""
    return bool(request_id)


class Rental(models.Model):
    """One all-or-nothing cluster order. Key and exact request bytes are fixed at submit."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="rentals"
    )
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="rentals")
    credential = models.ForeignKey(UpstreamCredential, on_delete=models.PROTECT, related_name="rentals")
    fabric_id = models.CharField(max_length=300)
    executor_ids = models.JSONField()
    pod_name = models.CharField(max_length=64, db_index=True)
    # Null: no X-Customer-Ref header is sent and the credential's own ref applies upstream.
    customer_ref = models.CharField(max_length=64, null=True, blank=True, db_index=True)  # noqa: DJ001 (None ≠ "")
    gpu_type = models.CharField(max_length=100, blank=True)
    gpus_per_node = models.PositiveIntegerField(default=0)
    price_per_hour = models.DecimalField(max_digits=12, decimal_places=4, default=0)

    # The rent form's one-time token: a double-click submits it twice, and the second finds this row.
    submit_token = models.UUIDField(null=True, blank=True, unique=True, editable=False)
    idempotency_key = models.UUIDField(unique=True, editable=False)
    request_body = models.BinaryField(editable=False)
    body_sha256 = models.CharField(max_length=64, editable=False)

    status = models.CharField(max_length=16, choices=RentalStatus.choices, default=RentalStatus.QUEUED)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # A scheduled start (`scheduled` until then; `rentals/orders/scheduled.py` sends it at this time). None: at once.
    start_at = models.DateTimeField(null=True, blank=True)
    # A scheduled start from a preset: its cheapest matching nodes are picked again at `start_at` (the presets app
    # answers `rentals.signals.scheduled_nodes_picking`). An id, not a key: rentals never depend on presets.
    preset_id = models.PositiveIntegerField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True, editable=False)
    first_sent_at = models.DateTimeField(null=True, blank=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    # Set when staff replay an `unknown` rental: automatic retrying may go on until then (at most first send
    # + 23 h, inside the upstream's 24 h key window), past the usual RENT_RETRY_WINDOW.
    retry_until = models.DateTimeField(null=True, blank=True)
    # Whether any attempt may have reached the upstream: decides `unknown` vs `failed` when retries end.
    possibly_sent = models.BooleanField(default=False)

    pod_ids = models.JSONField(default=list, blank=True)
    # At most one rental holds a cluster (`unique_rental_cluster`); "" is every rental whose cluster is not known.
    cluster_id = models.CharField(max_length=200, blank=True, db_index=True)
    replayed = models.BooleanField(default=False)
    removal_scheduled_at = models.DateTimeField(null=True, blank=True)
    # When Lium confirmed (or reconciliation found) the cluster: members that do not appear within a grace
    # period after this need a look.
    rented_at = models.DateTimeField(null=True, blank=True)
    # Time to ready: Lium's estimate when the order was submitted (its slowest node's; null: unknown), and when
    # every member first ran with the seconds that took from the first send (rentals.tracking.members).
    estimated_ready_seconds = models.PositiveIntegerField(null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    ready_seconds = models.PositiveIntegerField(null=True, blank=True)
    # The fabric is measured over SSH before hand-over (verifying); its check is `fabric_check`.
    verify_fabric = models.BooleanField(default=False)

    # Cluster removal: one live retry chain per rental. A worker claims the next DELETE by moving
    # `next_delete_at` forward with a conditional UPDATE; the sweeper enqueues only rentals whose time is past.
    next_delete_at = models.DateTimeField(null=True, blank=True)
    delete_attempts = models.PositiveIntegerField(default=0)

    # Automatic reconciliation of an `unknown` rental: a bounded number of looks in `GET /pods`, with backoff.
    next_reconcile_at = models.DateTimeField(null=True, blank=True)
    reconcile_looks = models.PositiveIntegerField(default=0)
    last_reconcile_at = models.DateTimeField(null=True, blank=True)

    error_code = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    error_hint = models.TextField(blank=True)
    error_request_id = models.CharField(max_length=100, blank=True, db_index=True)

    created_at = models.DateTimeField(auto_now_add=True)  # indexed by `rental_created_cover`
    updated_at = models.DateTimeField(auto_now=True)
    # Bumped by every write that changes what the progress fragment shows; the poll compares it.
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="rental_status_due"),
            # Beat's due scheduled rentals, earliest first (only the few still waiting are in it).
            models.Index(fields=["start_at"], condition=models.Q(status="scheduled"), name="rental_scheduled_start"),
            models.Index(fields=["status", "-created_at"], name="rental_status_recent"),
            # Each state's least recently updated rentals, read in order (the sweeper's stuck queued rentals).
            models.Index(fields=["status", "updated_at"], name="rental_status_updated"),
            # The ops attention queue: the rentals that may need a human, least recently updated first; its first
            # rows that meet a reason are the queue, however many rentals are unknown or degraded.
            models.Index(
                fields=["updated_at"], condition=models.Q(status__in=ATTENTION_STATES), name="rental_attention"
            ),
            # "My rentals", newest first, paged by (created_at, id): the id makes the order the index's own, so
            # no page sorts the customer's whole history.
            models.Index(fields=["customer", "-created_at", "-id"], name="rental_customer_recent_id"),
            # Support search: the newest rentals of a customer ref or of a user come straight off these, with
            # the id in the index so the read is index-only (without it, one heap page per rental found).
            models.Index(fields=["customer_ref", "-created_at", "-id"], name="rental_ref_recent_id"),
            models.Index(fields=["created_by", "-created_at", "-id"], name="rental_creator_recent_id"),
            models.Index(fields=["credential", "status"], name="rental_credential_status"),
            # Every range read on `created_at`; with state and customer in the index, the ops overview counts a
            # window's first part-hour (up to an hour of rentals) index-only instead of one heap page per rental.
            models.Index(fields=["created_at"], include=["status", "customer"], name="rental_created_cover"),
            # Reconciliation's rivals, on every credential: the few orders by pod name that hold no cluster yet.
            models.Index(
                fields=["pod_name"],
                condition=models.Q(cluster_id="", status__in=UNSETTLED_STATES),
                name="rental_unsettled_pod_name",
            ),
            # The ops overview's estimate error over the last day: only rentals that had an estimate.
            models.Index(
                fields=["ready_at"],
                condition=models.Q(estimated_ready_seconds__isnull=False),
                name="rental_estimate_ready",
            ),
            # The ops overview's time to ready per fabric type: the rentals that became ready in the last week.
            models.Index(fields=["ready_at"], name="rental_ready_at"),
        ]
        constraints = [
            # Evidence is exclusive: many customers share one Lium account, and a second holder of a cluster would
            # show one customer's SSH lines to another and let them delete it (rentals.tracking.holding).
            models.UniqueConstraint(
                fields=["cluster_id"], condition=~models.Q(cluster_id=""), name="unique_rental_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pod_name} ({self.get_status_display()})"

    @property
    def status_label(self) -> str:
        """The state's display name; cheaper than `get_status_display()`, which rebuilds the choices each call."""
        return STATUS_LABELS.get(self.status, self.status)

    @property
    def error_from_lium(self) -> bool:
        """Whether `error_message` is Lium's answer ("Lium said:") or the dashboard's own words ("Why:")."""
        return error_from_lium(self.error_request_id)

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATES

    @property
    def is_in_flight(self) -> bool:
        return self.status in IN_FLIGHT_STATES

    @property
    def node_count(self) -> int:
        return len(self.executor_ids or [])


class RentalNode(models.Model):
    """One executor a rental asked for: lets support find a rental by node id with an index."""

    rental = models.ForeignKey(Rental, on_delete=models.CASCADE, related_name="nodes")
    executor_id = models.CharField(max_length=100)  # indexed by `node_executor_rental`

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rental", "executor_id"], name="unique_rental_node")]
        # Support search: a node is rented again and again, so its id names many rentals over time; their
        # newest come off this index, index-only (as for overlay IPs).
        indexes = [models.Index(fields=["executor_id", "rental"], name="node_executor_rental")]

    def __str__(self) -> str:
        return self.executor_id


class RentAttempt(models.Model):
    """One upstream rent call, as it happened. Append-only."""

    class Classification(models.TextChoices):
        CONFIRMED = "confirmed", "Confirmed"
        REFUSED = "refused", "Refused (nothing rented)"
        INCONCLUSIVE = "inconclusive", "Inconclusive (will retry with the same key)"
        NEVER_SENT = "never_sent", "Never reached the server"
        OUTCOME_UNKNOWN = "outcome_unknown", "Outcome unknown"

    rental = models.ForeignKey(Rental, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    http_status = models.PositiveIntegerField(null=True, blank=True)
    classification = models.CharField(max_length=20, choices=Classification.choices)
    error_code = models.CharField(max_length=100, blank=True)
    message = models.TextField(blank=True)
    replayed = models.BooleanField(default=False)
    request_id = models.CharField(max_length=100, blank=True, db_index=True)

    class Meta:
        ordering = ["rental", "number"]
        indexes = [
            models.Index(fields=["started_at"], name="attempt_started"),
            # The ops overview's 429s of the last day, without reading the day's other attempts.
            models.Index(fields=["started_at"], condition=models.Q(http_status=429), name="attempt_429_started"),
        ]
        constraints = [models.UniqueConstraint(fields=["rental", "number"], name="unique_attempt_number")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.rental_id}: {self.classification}"


class ClusterMember(models.Model):
    """One pod of a rented cluster, as last seen in the upstream's pod list."""

    rental = models.ForeignKey(Rental, on_delete=models.CASCADE, related_name="members")
    # A pod belongs to one rental: the one whose cluster it carries (Lium's pod ids are never reused).
    pod_id = models.CharField(max_length=100, unique=True)
    rank = models.PositiveIntegerField(null=True, blank=True)
    overlay_ip = models.CharField(max_length=45, blank=True)  # indexed by `member_overlay_ip_rental`
    status = models.CharField(max_length=32, blank=True)
    phase = models.CharField(max_length=64, blank=True)
    eta_seconds = models.PositiveIntegerField(null=True, blank=True)
    ssh_command = models.CharField(max_length=300, blank=True)
    executor_id = models.CharField(max_length=100, blank=True)  # indexed by `member_executor_rental`
    price_per_hour = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    # How to reach the member's services (from its pod row; checked there: an http(s) URL, int ports).
    jupyter_url = models.CharField(max_length=500, blank=True)
    ports_mapping = models.JSONField(default=dict, blank=True)  # {"container port": host port}
    # Why it failed: the upstream's events of this pod, fetched once it failed (rentals.tracking.member_events).
    events = models.JSONField(default=list, blank=True)
    events_fetched_at = models.DateTimeField(null=True, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    running_since = models.DateTimeField(null=True, blank=True)
    gone_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["rental", "rank"]
        # Support search: clusters reuse their private overlay addresses (every cluster's rank 0 may be
        # 10.42.0.1), so an address names many rentals; their newest come off this index, index-only.
        # A node's id names many rentals too (it is rented again and again): the same, by executor.
        indexes = [
            models.Index(fields=["overlay_ip", "rental"], name="member_overlay_ip_rental"),
            models.Index(fields=["executor_id", "rental"], name="member_executor_rental"),
        ]

    def __str__(self) -> str:
        return f"rank {self.rank} {self.pod_id}"


class CustomerRemovalPolicy(models.Model):
    """How long a customer's clusters live unless someone says otherwise, set by operators.

    `default_hours` fills an order's `termination_hours` when it names none; `max_hours` caps it, and caps how
    far from now a member may push a scheduled removal (operators are not held to it).
    """

    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="removal_policy")
    default_hours = models.PositiveIntegerField(null=True, blank=True)
    max_hours = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        verbose_name_plural = "customer removal policies"

    def __str__(self) -> str:
        return f"{self.customer}: default {self.default_hours or '-'} h, max {self.max_hours or '-'} h"


class RentalEvent(models.Model):
    """The rental's timeline: state changes, findings, staff actions and views. Append-only."""

    class Kind(models.TextChoices):
        CREATED = "created", "Created"
        STATE = "state", "State change"
        ATTEMPT = "attempt", "Attempt"
        RECONCILE = "reconcile", "Reconciliation"
        STAFF_ACTION = "staff_action", "Staff action"
        SUPPORT_VIEW = "support_view", "Support view"
        MEMBER = "member", "Member change"
        DEFECT = "defect", "Defect"

    rental = models.ForeignKey(Rental, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind}: {self.message}"


class FabricCheck(models.Model):
    """A verified rental's fabric check: its own key (the private half encrypted, emptied after the check) and what
    it measured. Bandwidths in Gb/s."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for the nodes"
        RUNNING = "running", "Running"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Under the floor"
        ERROR = "error", "Could not measure"

    rental = models.OneToOneField(Rental, on_delete=models.CASCADE, related_name="fabric_check")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    public_key_line = models.TextField(editable=False)
    private_key_encrypted = models.TextField(blank=True, editable=False)  # "" once destroyed
    link_rate_gbps = models.FloatField()  # the fabric's, read from its offer at submit
    floor_gbps = models.FloatField(null=True, blank=True)
    bus_bandwidth_gbps = models.FloatField(null=True, blank=True)
    pairs = models.JSONField(default=list, blank=True)  # [{"ranks": [a, b], "bus_bandwidth_gbps": x}]
    slow_ranks = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    keys_removed = models.BooleanField(null=True, blank=True)  # None until the check ran
    kept_unverified = models.BooleanField(default=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # "Rent again without the slow node(s)": the rental that replaced this one (one click rents once).
    rented_again = models.OneToOneField(
        Rental, null=True, blank=True, on_delete=models.SET_NULL, related_name="replaces_check"
    )

    def __str__(self) -> str:
        return f"Fabric check of rental {self.rental_id}: {self.status}"


class Heartbeat(models.Model):
    """The last time a periodic job ran (the sweeper, a credential's pod poller)."""

    name = models.CharField(max_length=100, unique=True)
    at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} at {self.at}"
