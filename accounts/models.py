"""Customers (tenants), who belongs to them, and the Lium credentials rentals go out with."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from accounts.crypto import secret_decrypt, secret_encrypt

# What we accept for X-Customer-Ref: a short label of safe characters (the simulator enforces the same
# rule). No spaces or control characters, so a header can never be split or smuggled.
CUSTOMER_REF_MAX_LENGTH = 64
# What a support read names ("team page", "deliveries of webhook 12 (API)"): cut to this length.
SUPPORT_READ_WHAT_MAX_LENGTH = 100
customer_ref_validator = RegexValidator(
    regex=r"\A[A-Za-z0-9._:@-]{1,64}\Z",
    message=(
        "A customer ref is 1 to 64 characters: letters, digits and . _ : @ - only "
        "(no spaces, newlines or other characters)."
    ),
)


class UpstreamCredential(models.Model):
    """A Lium API key or bearer token; the secret is encrypted and never rendered."""

    class Scheme(models.TextChoices):
        API_KEY = "api_key", "API key (X-API-Key)"
        BEARER = "bearer", "Bearer token (Authorization: Bearer)"

    name = models.CharField(max_length=100, unique=True)
    scheme = models.CharField(max_length=16, choices=Scheme.choices, default=Scheme.API_KEY)
    secret_encrypted = models.TextField(editable=False)
    secret_last4 = models.CharField(max_length=4, editable=False)
    base_url = models.URLField(default="", blank=True, help_text="Empty means LIUM_BASE_URL.")
    customer_ref = models.CharField(
        max_length=CUSTOMER_REF_MAX_LENGTH,
        blank=True,
        validators=[customer_ref_validator],
        help_text="The key's own customer ref upstream, if known (applies when a rental sends none).",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} (…{self.secret_last4})"

    def set_secret(self, secret: str) -> None:
        """Encrypt and store a new secret, keeping only its last 4 characters in clear."""
        if not secret or any(ch.isspace() for ch in secret):
            raise ValidationError("The secret must be non-empty and contain no spaces or newlines.")
        self.secret_encrypted = secret_encrypt(secret)
        self.secret_last4 = secret[-4:]

    def get_secret(self) -> str:
        """Return the clear secret (only the upstream client should call this)."""
        return secret_decrypt(self.secret_encrypted)

    @property
    def effective_base_url(self) -> str:
        return (self.base_url or settings.LIUM_BASE_URL).rstrip("/")


class Customer(models.Model):
    """An end customer: its rentals are tagged upstream with its customer_ref."""

    name = models.CharField(max_length=200, unique=True)
    customer_ref = models.CharField(
        max_length=CUSTOMER_REF_MAX_LENGTH,
        blank=True,
        validators=[customer_ref_validator],
        help_text="Sent as X-Customer-Ref on this customer's rentals; empty sends none.",
    )
    default_credential = models.ForeignKey(
        UpstreamCredential, null=True, blank=True, on_delete=models.PROTECT, related_name="customers"
    )
    # Moved to billing.CustomerQuota.max_hourly_usd (billing 0004 copied it); nothing reads it any more. Dropping
    # the column needs an accounts migration, which the quota branch could not number.
    hourly_spend_cap_usd = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Optional: refuse a rental that would take this customer's running clusters above this USD/hour.",
    )
    verify_fabric_default = models.BooleanField(
        default=False,
        help_text="Pre-tick 'verify the fabric' on this customer's orders (an order may still say otherwise).",
    )
    require_two_factor = models.BooleanField(
        default=False,
        help_text="Members without an authenticator app are sent to set one up at their next sign-in.",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's membership of a customer: the user rents for it and sees its rentals."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="memberships")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "customer"], name="unique_membership")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.customer}"


class SshPublicKey(models.Model):
    """An SSH public key saved in a user's profile, offered on the rent form."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=100)
    public_key = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="unique_ssh_key_name")]

    def __str__(self) -> str:
        return self.name


class SupportRead(models.Model):
    """Support reading a customer's data that is not one rental's page (`accounts.audit`): a list of its
    webhook endpoints or deliveries, its team, its usage. One rental's reads are on the rental's timeline."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="+")
    # Kept when the reader's account is deleted (the row still says a read happened), like a timeline's actor.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    what = models.CharField(max_length=SUPPORT_READ_WHAT_MAX_LENGTH)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # The interval check ("read within 10 minutes?") and the audit page's newest first.
            models.Index(fields=["actor", "what", "at"], name="support_read_recent"),
            models.Index(fields=["-at", "-id"], name="support_read_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} read {self.what} of {self.customer} at {self.at:%Y-%m-%d %H:%M}"


ACCOUNT_CHANGE_WHAT_MAX_LENGTH = 200


class AccountChange(models.Model):
    """A change to someone's sign-in (password, e-mail, two-factor, sessions, a team's two-factor rule):
    who it is about, who made it (themselves, a customer admin, the reset link), what, when, from where."""

    # Kept when either account is deleted (the row still says what happened), with the username it had.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    what = models.CharField(max_length=ACCOUNT_CHANGE_WHAT_MAX_LENGTH)
    address = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["-at", "-id"], name="account_change_newest")]

    def __str__(self) -> str:
        return f"{self.username}: {self.what} at {self.at:%Y-%m-%d %H:%M}"
