"""Prometheus gauges for the Lium balance: read from the latest stored reading at scrape time."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class RunwayCollector(Collector):
    """`dashboard_lium_balance_usd{credential}` and `dashboard_lium_runway_hours{credential}` (+Inf: nothing runs)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from billing.runway import runway_rows

        balance = GaugeMetricFamily("dashboard_lium_balance_usd", "Last read Lium balance", labels=["credential"])
        runway = GaugeMetricFamily(
            "dashboard_lium_runway_hours",
            "Hours the Lium balance lasts at the cost of the running clusters",
            labels=["credential"],
        )
        for row in runway_rows():
            if row.balance_usd is None:
                continue
            balance.add_metric([row.credential_name], float(row.balance_usd))
            runway.add_metric([row.credential_name], math.inf if row.runway_hours is None else float(row.runway_hours))
        yield balance
        yield runway
