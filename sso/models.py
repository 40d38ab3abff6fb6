"""A customer's OpenID Connect provider and the e-mail domains whose people sign in through it."""

from django.db import models

from accounts.crypto import secret_decrypt, secret_encrypt
from accounts.models import Customer


class SsoConfig(models.Model):
    """One customer's identity provider; the client secret is encrypted (accounts.crypto) and never rendered."""

    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="sso_config")
    issuer_url = models.URLField(max_length=500, help_text="The provider's issuer, e.g. https://login.acme.example")
    client_id = models.CharField(max_length=255)
    client_secret_encrypted = models.TextField(editable=False)
    mandatory = models.BooleanField(
        default=False, help_text="People of these domains who belong to this customer cannot sign in with a password."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "SSO configuration"

    def __str__(self) -> str:
        return f"SSO of {self.customer}"

    def set_client_secret(self, secret: str) -> None:
        self.client_secret_encrypted = secret_encrypt(secret)

    def get_client_secret(self) -> str:
        """Return the clear secret (only the sign-in flow's token request uses it)."""
        return secret_decrypt(self.client_secret_encrypted)

    @property
    def provider_id(self) -> str:
        """The id allauth knows this provider by; it names the SocialAccount rows the provider's `sub`s bind."""
        return f"customer-{self.customer_id}"


class SsoDomain(models.Model):
    """An e-mail domain a customer's provider owns: unique across customers, stored lower-case."""

    config = models.ForeignKey(SsoConfig, on_delete=models.CASCADE, related_name="domains")
    domain = models.CharField(max_length=253, unique=True)

    class Meta:
        ordering = ["domain"]

    def __str__(self) -> str:
        return self.domain
