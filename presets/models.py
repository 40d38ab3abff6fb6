"""A saved rent form (`Preset`), shared within a customer, and a capacity watch (`CapacityWatch`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accounts.models import Customer
from presets.wants import NodeWant

FABRIC_TYPES = [("", "any"), ("infiniband", "InfiniBand"), ("roce", "RoCE")]


class NodeWantFields(models.Model):
    """What nodes a preset or a watch asks for: "" or None means any."""

    gpu_type = models.CharField(max_length=100, blank=True)
    node_count = models.PositiveSmallIntegerField()
    fabric_type = models.CharField(max_length=16, blank=True, choices=FABRIC_TYPES)
    min_link_rate_gbps = models.PositiveIntegerField(null=True, blank=True)
    max_price_per_node_hour = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def want(self) -> NodeWant:
        return NodeWant(
            node_count=self.node_count,
            gpu_type=self.gpu_type,
            fabric_type=self.fabric_type,
            min_link_rate_gbps=self.min_link_rate_gbps,
            max_price_per_node_hour=self.max_price_per_node_hour,
        )


class Preset(NodeWantFields):
    """What the rent form asks for, minus the nodes: they are picked when it is used (`presets.matching`)."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="presets")
    name = models.CharField(max_length=100)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # The rest of the order, as the rent form has it.
    pod_name = models.CharField(max_length=63)
    template_id = models.CharField(max_length=100, blank=True)  # "": the newest cluster template
    initial_port_count = models.PositiveSmallIntegerField(null=True, blank=True)
    termination_hours = models.PositiveSmallIntegerField(null=True, blank=True)
    enable_jupyter = models.BooleanField(default=False)
    ssh_public_keys = models.TextField()  # one validated key per line

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["customer", "name"], name="unique_preset_name_per_customer")]

    def __str__(self) -> str:
        return self.name

    @property
    def public_keys(self) -> list[str]:
        return [line for line in self.ssh_public_keys.splitlines() if line.strip()]


class CapacityWatch(NodeWantFields):
    """ "Tell me (or rent) when N nodes of GPU X are free on one fabric at most $Y a node-hour", until `expires_at`.

    It ends once: `fired` (matched; `rental` set when it rented by itself), `expired` or `cancelled`; the
    conditional UPDATE from `active` is what makes it fire once (`presets.watching`).
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "watching"
        FIRED = "fired", "capacity found"
        EXPIRED = "expired", "expired"
        CANCELLED = "cancelled", "cancelled"
        FAILED = "failed", "found, but the order was refused"

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="capacity_watches")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    preset = models.ForeignKey(Preset, null=True, blank=True, on_delete=models.SET_NULL, related_name="watches")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    auto_rent = models.BooleanField(default=False)  # needs a preset: its pod name, keys and options
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    fabric_id = models.CharField(max_length=300, blank=True)  # where it matched
    executor_ids = models.JSONField(default=list, blank=True)
    outcome = models.TextField(blank=True)  # what happened, in a customer's words
    rental = models.ForeignKey("rentals.Rental", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    demand_signal = models.CharField(max_length=200, blank=True)  # what Lium answered to POST /machine-requests

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.node_count} x {self.gpu_type or 'any GPU'}"
