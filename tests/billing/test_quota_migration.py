"""billing 0004 moves each customer's hourly spend cap into its operators' USD-per-hour quota."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("billing", "0003_statement"), ("accounts", "0004_customer_verify_fabric_default")]
AFTER = [("billing", "0004_customer_quota")]


def migrate(targets):  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_the_spend_caps_become_hourly_quotas_and_nothing_else_is_capped() -> None:
    old = migrate(BEFORE)
    Customer = old.get_model("accounts", "Customer")
    capped = Customer.objects.create(name="Capped", hourly_spend_cap_usd=Decimal("12.50"))
    free = Customer.objects.create(name="Free")
    try:
        new = migrate(AFTER)
        quotas = new.get_model("billing", "CustomerQuota").objects
        quota = quotas.get(customer_id=capped.pk)
        assert (quota.max_hourly_usd, quota.max_gpus, quota.max_clusters) == (Decimal("12.50"), None, None)
        assert not quotas.filter(customer_id=free.pk).exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
