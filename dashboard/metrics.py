"""Prometheus metrics at /metrics.

Rentals by state, attempts by classification, upstream latency and queue latency are read from the
database at scrape time (a custom collector), so they are the same whichever web or worker process
answers and survive restarts. Poll requests are counted in this process (set PROMETHEUS_MULTIPROC_DIR to
aggregate several gunicorn workers, as prometheus_client documents).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, ExpressionWrapper, F, Q, Sum, fields
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.crypto import constant_time_compare
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from billing.metrics import RunwayCollector
from common.metrics import POLL_REQUESTS

LATENCY_BUCKETS_MS = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
QUEUE_BUCKETS_S = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

logger = logging.getLogger(__name__)
_told_why_hidden = False


class DatabaseCollector(Collector):
    """Read rental and attempt figures from the database when Prometheus scrapes."""

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        from rentals.models import Rental, RentAttempt

        rentals = GaugeMetricFamily("dashboard_rentals", "Rentals by state", labels=["state"])
        for row in Rental.objects.values("status").annotate(n=Count("id")).order_by():
            rentals.add_metric([row["status"]], row["n"])
        yield rentals

        attempts = GaugeMetricFamily(
            "dashboard_rent_attempts", "Upstream rent attempts by classification", labels=["classification"]
        )
        for row in RentAttempt.objects.values("classification").annotate(n=Count("id")).order_by():
            attempts.add_metric([row["classification"]], row["n"])
        yield attempts

        buckets = {f"le_{bound}": Count("id", filter=Q(duration_ms__lte=bound)) for bound in LATENCY_BUCKETS_MS}
        stats = RentAttempt.objects.aggregate(n=Count("id"), total_ms=Sum("duration_ms"), **buckets)
        latency = HistogramMetricFamily("dashboard_upstream_rent_latency_seconds", "Duration of upstream rent calls")
        latency.add_metric(
            [],
            [(str(bound / 1000), float(stats[f"le_{bound}"])) for bound in LATENCY_BUCKETS_MS]
            + [("+Inf", float(stats["n"]))],
            sum_value=float(stats["total_ms"] or 0) / 1000,
        )
        yield latency

        waited = ExpressionWrapper(F("first_sent_at") - F("created_at"), output_field=fields.DurationField())
        sent = Rental.objects.filter(first_sent_at__isnull=False).annotate(waited=waited)
        queue_stats = sent.aggregate(
            n=Count("id"),
            total=Sum("waited"),
            **{
                f"le_{i}": Count("id", filter=Q(waited__lte=timedelta(seconds=b)))
                for i, b in enumerate(QUEUE_BUCKETS_S)
            },
        )
        queue = HistogramMetricFamily(
            "dashboard_task_queue_latency_seconds", "Time from saving a rental to its first send"
        )
        queue.add_metric(
            [],
            [(str(b), float(queue_stats[f"le_{i}"])) for i, b in enumerate(QUEUE_BUCKETS_S)]
            + [("+Inf", float(queue_stats["n"]))],
            sum_value=queue_stats["total"].total_seconds() if queue_stats["total"] else 0.0,
        )
        yield queue


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve the metrics; with METRICS_TOKEN set, only to `Authorization: Bearer <token>`.

    Production without a token answers 404: business figures are never public by accident.
    """
    global _told_why_hidden
    token = getattr(settings, "METRICS_TOKEN", "")
    if not token and settings.PRODUCTION:
        if not _told_why_hidden:  # once per process, not once per scrape
            logger.warning("/metrics answers 404: METRICS_TOKEN is not set (required in production)")
            _told_why_hidden = True
        raise Http404("metrics are off")
    if token and not constant_time_compare(request.headers.get("Authorization", ""), f"Bearer {token}"):
        return HttpResponse("Unauthorized", status=401)
    registry = CollectorRegistry()
    registry.register(DatabaseCollector())
    registry.register(RunwayCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        registry.register(POLL_REQUESTS)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
