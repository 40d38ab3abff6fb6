"""Counters kept in the process that counts them; `dashboard.metrics` serves them with the database figures."""

from __future__ import annotations

from prometheus_client import Counter

POLL_REQUESTS = Counter("dashboard_poll_requests_total", "Progress fragment polls served", ["outcome"])
