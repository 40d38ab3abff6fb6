"""An invitation token never reaches a log line we write: not gunicorn's access or error log, not Django's
loggers (`django.request` logs the path of a 4xx/5xx, `django.server` every request line of the dev server)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.test import Client

from billing.invitations import invitation_create
from tests.conftest import REPO_ROOT, free_port, stop_process, wait_for_http
from tests.site.test_production import PRODUCTION_ENV

GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py"]
TOKEN = "inv_made-up-but-shaped-like-one-0123456789abcdef"


@pytest.fixture
def django_log_lines() -> Iterator[io.StringIO]:
    """What the configured handlers (root's console, and the dev server's) write, as text."""
    written = io.StringIO()
    handlers = {*logging.getLogger().handlers, *logging.getLogger("django.server").handlers}
    streams = {h: h.setStream(written) for h in handlers if isinstance(h, logging.StreamHandler)}
    try:
        yield written
    finally:
        for handler, stream in streams.items():
            if stream is not None:
                handler.setStream(stream)


@pytest.mark.django_db
def test_djangos_loggers_redact_the_token(django_log_lines, olga, acme) -> None:
    assert Client().get(f"/invite/{TOKEN}/").status_code == 410  # django.request: "Gone: /invite/…"
    logging.getLogger("django.server").info('"GET /invite/%s/ HTTP/1.1" 302 0', TOKEN)  # as runserver logs it
    real = invitation_create(customer=acme, created_by=olga).token
    landed = Client().get(f"/invite/{real}/")
    assert landed.status_code == 302 and landed["Location"] == "/invite/"
    assert landed["Referrer-Policy"] == "no-referrer"
    text = django_log_lines.getvalue()
    assert "Gone: /invite/[redacted]/" in text and '"GET /invite/[redacted]/ HTTP/1.1" 302' in text
    assert TOKEN not in text and real not in text


def test_gunicorns_access_and_error_logs_redact_the_token(tmp_path: Path) -> None:
    """The production server, with the deploy config, writes no token (the request fails: no tables here)."""
    port = free_port()
    env = {
        **os.environ,
        **PRODUCTION_ENV,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECURE_SSL_REDIRECT": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "RUN_DIR": str(tmp_path),
    }
    output = tmp_path / "server.log"
    with output.open("w") as sink:
        server = subprocess.Popen(
            [*GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", "1", "dashboard.wsgi"],
            cwd=REPO_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/healthz", process=server)
            httpx.get(f"http://127.0.0.1:{port}/invite/{TOKEN}/", headers={"Referer": f"https://x/invite/{TOKEN}/"})
        finally:
            stop_process(server)
    text = output.read_text()
    assert "/invite/[redacted]/" in text  # the access line is there, without the token
    assert TOKEN not in text
