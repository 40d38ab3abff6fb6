"""Production readiness: deploy checks, required secrets, readiness probe, metrics, JSON logs, limits."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from common.logcontext import ContextFilter
from dashboard import health
from rentals import engine
from rentals.models import Heartbeat
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.tracking import members
from tests.conftest import REPO_ROOT, SIM_KEY, SSH_KEY, Simulator, free_port, start_gunicorn

PRODUCTION_ENV = {
    "DASHBOARD_ENV": "production",
    "SECRET_KEY": "x" * 60 + "-production-secret-for-the-check",
    "FIELD_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    "ALLOWED_HOSTS": "dash.example.com",
    # Without it production keeps /metrics off and the checks warn (tests/site/test_metrics_and_probes.py).
    "METRICS_TOKEN": "metrics-token-for-the-check",
}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # A production process starts from a clean slate: no test-only switches (the browser tests set
    # DJANGO_ALLOW_ASYNC_UNSAFE for Playwright) and no development secrets.
    unwanted = {"SECRET_KEY", "FIELD_ENCRYPTION_KEYS", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in unwanted}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_deploy_check_prints_no_warning_in_production() -> None:
    result = manage("check", "--deploy", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNING" not in result.stderr


@pytest.mark.parametrize("missing", ["SECRET_KEY", "FIELD_ENCRYPTION_KEYS"])
def test_production_refuses_to_start_without_a_secret_and_names_it(missing: str) -> None:
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != missing}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert f"{missing} must be set when DASHBOARD_ENV=production" in result.stderr


def wait_for_redis(port: int, timeout: float = 15.0) -> None:
    """Return once a Redis on `port` answers PING (a busy machine starts it in more than a moment)."""
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            if redis.Redis(port=port, socket_connect_timeout=0.5).ping():
                return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.django_db
def test_readyz_names_the_broker_while_redis_is_down_and_recovers(client, settings) -> None:
    settings.READYZ_BROKER_CHECK_SECONDS = 0  # every probe asks the broker (the answer is otherwise reused)
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        pytest.skip("redis-server is not installed: cannot stop and restart a real broker here")
    from dashboard.celery import app

    port = free_port()
    start = [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(start, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    original = app.conf.broker_url, app.conf.broker_write_url
    app.conf.broker_url = app.conf.broker_write_url = f"redis://127.0.0.1:{port}/0"
    # The embedded default names its file-system transport, which would win over the URL (read from the settings).
    settings.CELERY_BROKER_TRANSPORT = None
    Heartbeat.objects.update_or_create(name="sweeper", defaults={"at": timezone.now()})
    health.broker_check.forget()
    health.secrets_check.forget()
    try:
        wait_for_redis(port)
        assert client.get("/readyz").status_code == 200
        server.terminate()
        server.wait(timeout=10)
        down = client.get("/readyz")
        assert down.status_code == 503
        assert any(part.startswith("broker") for part in down.json()["failing"])
        server = subprocess.Popen(start, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_redis(port)
        assert client.get("/readyz").status_code == 200
    finally:
        app.conf.broker_url, app.conf.broker_write_url = original
        server.terminate()
        server.wait(timeout=10)
        health.broker_check.forget()  # the next probe asks the real broker, not this test's stopped one


@pytest.mark.django_db
def test_readyz_names_a_sweeper_that_stopped(client) -> None:
    health.broker_check.forget()  # answers remembered from another test's broker or keys say nothing here
    health.secrets_check.forget()
    Heartbeat.objects.update_or_create(name="sweeper", defaults={"at": timezone.now() - timedelta(hours=1)})
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["sweeper: last ran 3600 s ago"]


@pytest.mark.django_db
def test_metrics_count_rentals_by_state(client, alice, acme, monkeypatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    order = RentOrder(fabric_id="f", executor_ids=["a", "b"], pod_name="job", public_keys=[SSH_KEY])
    rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    body = client.get("/metrics").content.decode()
    assert 'dashboard_rentals{state="queued"} 1.0' in body
    assert "dashboard_upstream_rent_latency_seconds_bucket" in body


@pytest.mark.django_db(transaction=True)
def test_a_rentals_production_logs_are_json_lines_with_its_id_and_no_secret(
    simulator: Simulator, alice, acme, monkeypatch
) -> None:
    from pythonjsonlogger.json import JsonFormatter

    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    previous_level = root.level
    root.setLevel(logging.DEBUG)
    try:
        offer = simulator.offers()[0]
        order = RentOrder(
            fabric_id=offer["fabric_id"],
            executor_ids=[n["id"] for n in offer["nodes"][:2]],
            pod_name="logged",
            public_keys=[SSH_KEY],
        )
        rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
        assert engine.rental_attempt(rental_id=rental.pk) == "rented"
        members.credential_pods_sync(credential_id=rental.credential_id, force=True)
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
    lines = [line for line in stream.getvalue().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    ours = [record for record in records if record["name"].startswith("rentals")]
    assert len(ours) >= 3, "saving, sending and settling the rental are each logged"
    assert all(record.get("rental_id") == str(rental.public_id) for record in ours)
    assert all(record.get("idempotency_key") == str(rental.idempotency_key) for record in ours)
    assert SIM_KEY not in stream.getvalue()


@pytest.mark.django_db
def test_submitting_too_many_orders_a_minute_is_refused_with_the_wait(
    simulator: Simulator, alice, client_for, settings, monkeypatch
) -> None:
    from tests.web.test_rent_form import form_data

    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    settings.RENT_SUBMIT_RATE_PER_MINUTE = 1
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    assert client.post(f"/rent/?fabric={fabric_id}", form_data(client, fabric_id)).status_code == 302
    html = client.post(f"/rent/?fabric={fabric_id}", form_data(client, fabric_id)).content.decode()
    assert "Too many orders in a minute" in html


def test_a_production_server_answers_healthz(tmp_path) -> None:
    """The production settings really serve: gunicorn with the deploy config answers the liveness probe."""
    port = free_port()
    env = {
        **os.environ,
        **PRODUCTION_ENV,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECURE_SSL_REDIRECT": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "RUN_DIR": str(tmp_path),
    }
    server = start_gunicorn(port=port, env=env)
    try:
        import httpx

        response = httpx.get(f"http://127.0.0.1:{port}/healthz")
        assert response.json() == {"status": "ok"}
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    finally:
        server.terminate()
        server.wait(timeout=15)
