"""Save or remove a customer's SSO configuration (its domains replaced in the same transaction)."""

from __future__ import annotations

import logging

from django.db import transaction

from accounts.models import Customer
from sso.models import SsoConfig, SsoDomain

logger = logging.getLogger(__name__)


@transaction.atomic
def sso_config_save(
    *, customer: Customer, issuer_url: str, client_id: str, client_secret: str, domains: list[str], mandatory: bool
) -> SsoConfig:
    """Create or update the customer's provider; an empty `client_secret` keeps the stored one."""
    config = SsoConfig.objects.select_for_update().filter(customer=customer).first() or SsoConfig(customer=customer)
    config.issuer_url, config.client_id, config.mandatory = issuer_url, client_id, mandatory
    if client_secret:
        config.set_client_secret(client_secret)
    config.save()
    config.domains.exclude(domain__in=domains).delete()
    have = set(config.domains.values_list("domain", flat=True))
    SsoDomain.objects.bulk_create([SsoDomain(config=config, domain=d) for d in domains if d not in have])
    # The secret is never logged: only who, which issuer and which domains.
    logger.info("sso config saved customer=%s issuer=%s domains=%s", customer.pk, issuer_url, ",".join(domains))
    return config


def sso_config_delete(*, customer: Customer) -> None:
    """Remove the customer's provider: its people sign in with a password again (accounts stay bound)."""
    SsoConfig.objects.filter(customer=customer).delete()
    logger.info("sso config removed customer=%s", customer.pk)
