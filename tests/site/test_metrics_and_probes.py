"""Production hides /metrics unless METRICS_TOKEN is set (and says why); /readyz stays cheap under probes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from django.utils import timezone

from dashboard import health
from rentals.models import Heartbeat
from tests.site.test_production import PRODUCTION_ENV, manage


def test_production_without_a_metrics_token_does_not_serve_metrics(client, settings, db) -> None:
    settings.PRODUCTION = True
    settings.METRICS_TOKEN = ""
    response = client.get("/metrics")
    assert response.status_code == 404
    assert b"dashboard_rentals" not in response.content


def test_production_serves_metrics_only_to_the_token(client, settings, db) -> None:
    settings.PRODUCTION = True
    settings.METRICS_TOKEN = "scrape-token-1234"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    response = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-1234"})
    assert response.status_code == 200
    assert b"dashboard_rentals" in response.content


def test_production_startup_check_says_why_metrics_are_off() -> None:
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "METRICS_TOKEN"}
    result = manage("check", env=env)
    assert result.returncode == 0, result.stderr
    assert "METRICS_TOKEN is not set" in result.stderr
    assert "/metrics answers 404" in result.stderr

    quiet = manage("check", env={**env, "METRICS_TOKEN": "scrape-token-1234"})
    assert quiet.returncode == 0, quiet.stderr
    assert "METRICS_TOKEN" not in quiet.stderr


class CountingBroker:
    """Stands in for Celery's connection_for_write and counts the connections /readyz opens."""

    def __init__(self) -> None:
        self.opened = 0
        self.refuse = False

    @contextlib.contextmanager
    def connection_for_write(self) -> Iterator[CountingBroker]:
        self.opened += 1
        yield self

    def ensure_connection(self, **_kwargs: object) -> None:
        if self.refuse:
            raise ConnectionRefusedError("broker down")


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch, settings, db) -> Iterator[CountingBroker]:  # type: ignore[no-untyped-def]
    from dashboard.celery import app

    counting = CountingBroker()
    monkeypatch.setattr(app, "connection_for_write", counting.connection_for_write)
    settings.READYZ_BROKER_CHECK_SECONDS = 5
    health.broker_check.forget()
    Heartbeat.objects.update_or_create(name="sweeper", defaults={"at": timezone.now()})
    yield counting
    health.broker_check.forget()


def test_frequent_readiness_probes_open_one_broker_connection(client, broker, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(health, "monotonic", lambda: now[0])
    for _ in range(20):
        assert client.get("/readyz").status_code == 200
    assert broker.opened == 1

    now[0] += 6  # past READYZ_BROKER_CHECK_SECONDS: the broker is asked again
    broker.refuse = True
    down = client.get("/readyz")
    assert down.status_code == 503
    assert down.json()["failing"] == ["broker: ConnectionRefusedError"]
    assert broker.opened == 2
