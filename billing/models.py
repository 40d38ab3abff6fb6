"""Money: budgets per customer and the alerts they raised, customer admins and their invitations, and the
readings of each Lium credential's balance with the runway alerts they raised."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from accounts.models import Customer, Membership, UpstreamCredential

THRESHOLDS = (80, 90, 100)


class CustomerBudget(models.Model):
    """A customer's monthly budget: set by operators, optionally lowered by the customer's own admins."""

    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="budget")
    monthly_budget_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True, help_text="Set by operators; empty: no budget."
    )
    customer_budget_usd = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Set by the customer's admins, at or below the operators' budget.",
    )
    # Off by default: at 100 % a warning goes out, and only with enforcement on do clusters end after the grace.
    enforce = models.BooleanField(default=False)
    grace_hours = models.PositiveIntegerField(default=24)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.customer}: {self.effective_usd or 'no budget'}"

    @property
    def effective_usd(self) -> Decimal | None:
        """Return the budget that applies: the lower of the two that are set, or None."""
        set_ones = [value for value in (self.monthly_budget_usd, self.customer_budget_usd) if value is not None]
        return min(set_ones) if set_ones else None


class CustomerQuota(models.Model):
    """A customer's quotas: GPUs at once, active clusters, USD per hour. Operators set them; the customer's admins
    may set lower ones for their team. Empty: no such quota. Checked at rent time with the customer row locked."""

    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="quota")
    max_gpus = models.PositiveIntegerField(null=True, blank=True, help_text="Set by operators; empty: no quota.")
    max_clusters = models.PositiveIntegerField(null=True, blank=True, help_text="Set by operators; empty: no quota.")
    # Was `Customer.hourly_spend_cap_usd` (copied here by billing 0004).
    max_hourly_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True, help_text="Set by operators; empty: no quota."
    )
    own_max_gpus = models.PositiveIntegerField(null=True, blank=True)
    own_max_clusters = models.PositiveIntegerField(null=True, blank=True)
    own_max_hourly_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"quotas of {self.customer}"

    def effective(self, name: str) -> Decimal | int | None:
        """Return the quota `name` (gpus, clusters, hourly_usd) that applies: the lower of the two set, or None."""
        set_ones = [v for v in (getattr(self, f"max_{name}"), getattr(self, f"own_max_{name}")) if v is not None]
        return min(set_ones) if set_ones else None


class BudgetAlert(models.Model):
    """A threshold a customer crossed in a month: written once, so each alert goes out once.

    The 100 % row also carries the enforcement: when the grace ends and when the clusters were terminated.
    """

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.CharField(max_length=7)  # YYYY-MM
    threshold_pct = models.PositiveSmallIntegerField()
    spent_usd = models.DecimalField(max_digits=12, decimal_places=2)
    budget_usd = models.DecimalField(max_digits=12, decimal_places=2)
    at = models.DateTimeField()
    terminate_after = models.DateTimeField(null=True, blank=True)
    terminated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        constraints = [
            models.UniqueConstraint(fields=["customer", "month", "threshold_pct"], name="unique_budget_alert")
        ]

    def __str__(self) -> str:
        return f"{self.customer} {self.month} {self.threshold_pct} %"


class CustomerAdmin(models.Model):
    """A member who administers their customer: invites and removes members, lowers the budget."""

    membership = models.OneToOneField(Membership, on_delete=models.CASCADE, related_name="admin_role")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"admin {self.membership}"


class FormerMember(models.Model):
    """Someone who was a member of a customer and left it (removed, however added): their SSH keys may still sit
    on its running clusters, which the team page warns of. The latest leaving only."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="former_members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    left_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["customer", "user"], name="former_member_once")]

    def __str__(self) -> str:
        return f"{self.user} left {self.customer}"


class Invitation(models.Model):
    """A link that lets one person join one customer, once, before it expires. Only its hash is stored."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="invitations")
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="invitations_sent"
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="invitations_used"
    )
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation to {self.customer} ({self.role})"


class BalanceReading(models.Model):
    """One reading of a credential's Lium balance (`GET /users/me`) and the runway it gives."""

    credential = models.ForeignKey(UpstreamCredential, on_delete=models.CASCADE, related_name="balance_readings")
    at = models.DateTimeField(db_index=True)
    balance_usd = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    hourly_cost_usd = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal(0))
    # None: nothing runs (no end in sight) or the balance is unknown.
    runway_hours = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["credential", "-at"], name="balance_credential_recent")]

    def __str__(self) -> str:
        return f"{self.credential_id} at {self.at}: {self.balance_usd}"


class RunwayAlert(models.Model):
    """A runway below RUNWAY_ALERT_HOURS: open until the runway recovers, so it alerts once per fall."""

    credential = models.ForeignKey(UpstreamCredential, on_delete=models.CASCADE, related_name="runway_alerts")
    at = models.DateTimeField()
    balance_usd = models.DecimalField(max_digits=14, decimal_places=4)
    hourly_cost_usd = models.DecimalField(max_digits=14, decimal_places=4)
    runway_hours = models.DecimalField(max_digits=14, decimal_places=2)
    resolved_at = models.DateTimeField(null=True, blank=True)
    webhook_status = models.CharField(max_length=300, blank=True)
    webhook_delivered_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        constraints = [
            models.UniqueConstraint(
                fields=["credential"], condition=models.Q(resolved_at__isnull=True), name="one_open_runway_alert"
            )
        ]

    def __str__(self) -> str:
        return f"runway {self.runway_hours} h on {self.credential_id}"


class StatementLine(models.Model):
    """One pod's cost on one UTC day: ours (`billing.pod_cost`) and what Lium's statement debited.

    Written by the daily statement check for every pod of ours that either side billed that day; `agrees` when the
    two are within a cent. A usage line is confirmed by Lium when every day of it has lines and all agree.
    """

    credential = models.ForeignKey(UpstreamCredential, on_delete=models.CASCADE, related_name="statement_lines")
    rental = models.ForeignKey("rentals.Rental", on_delete=models.CASCADE, related_name="statement_lines")
    pod_id = models.CharField(max_length=100)
    day = models.DateField()
    ours_usd = models.DecimalField(max_digits=14, decimal_places=4)
    # None: the pod is not on Lium's statement for that day (compared as 0).
    lium_usd = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    agrees = models.BooleanField()
    checked_at = models.DateTimeField()

    class Meta:
        ordering = ["-day", "pod_id"]
        constraints = [models.UniqueConstraint(fields=["pod_id", "day"], name="statement_line_pod_day")]
        indexes = [
            models.Index(fields=["rental", "day"], name="statement_line_rental_day"),
            models.Index(fields=["agrees", "-day"], name="statement_line_disagreeing"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_id} {self.day}: ours {self.ours_usd}, Lium {self.lium_usd}"

    @property
    def difference_usd(self) -> Decimal:
        return (self.lium_usd or Decimal(0)) - self.ours_usd


class OperatorNotice(models.Model):
    """Something an operator must look at, beside the runway: a statement day that disagrees, a refused pod listing.

    Open until what it reports is over (the day agrees again, a listing reads again), one open notice per kind and
    key, so each is sent once: a signed POST to OPERATOR_WEBHOOK_URL and an e-mail to each operator
    (`billing.operator_notices`), each part recorded when it went.
    """

    class Kind(models.TextChoices):
        STATEMENT_MISMATCH = "statement.mismatch", "Lium's statement disagrees"
        LISTING_REFUSED = "pods.listing_refused", "Pod listing refused"

    kind = models.CharField(max_length=40, choices=Kind.choices)
    key = models.CharField(max_length=100)  # what it is about within its kind, e.g. "3:2026-12-01"
    credential = models.ForeignKey(UpstreamCredential, on_delete=models.CASCADE, related_name="operator_notices")
    at = models.DateTimeField()
    subject = models.CharField(max_length=200)
    text = models.TextField()
    data = models.JSONField(default=dict, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    webhook_status = models.CharField(max_length=300, blank=True)
    webhook_delivered_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "key"], condition=models.Q(resolved_at__isnull=True), name="one_open_operator_notice"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"
