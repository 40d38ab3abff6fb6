"""The production web server: gunicorn (deploy/gunicorn.conf.py) with a real worker and the simulator.

In the second run of `make test` this is the gunicorn + PostgreSQL + Redis combination.
"""

from __future__ import annotations

import os
import re
import time

import httpx
import pytest

from tests.conftest import SSH_KEY, Simulator, _worker_database_url, free_port, start_gunicorn, stop_process

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def gunicorn_url(celery_worker_process, tmp_path, settings):  # type: ignore[no-untyped-def]
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _worker_database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_MAX_REQUESTS": "0",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    server = start_gunicorn(port=port, env=env, workers=2)
    url = f"http://127.0.0.1:{port}"
    try:
        yield url
    finally:
        stop_process(server)


def field(html: str, pattern: str) -> str:
    match = re.search(pattern, html)
    assert match, f"{pattern!r} not found"
    return match.group(1)


def test_alice_rents_through_gunicorn_and_the_page_reaches_ready(
    simulator: Simulator, gunicorn_url: str, alice, settings
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # what gunicorn verifies
    alice.set_password("pw")
    alice.save()
    with httpx.Client(base_url=gunicorn_url, timeout=20) as web:
        login = web.get("/accounts/login/").text
        token = field(login, r'name="csrfmiddlewaretoken" value="([^"]+)"')
        response = web.post("/accounts/login/", data={"login": "alice", "password": "pw", "csrfmiddlewaretoken": token})
        assert response.status_code == 302, "logged in"
        fabric_id = simulator.offers()[0]["fabric_id"]
        form = web.get("/rent/", params={"fabric": fabric_id, "cheapest": "2"}).text
        data = {
            "csrfmiddlewaretoken": field(form, r'name="csrfmiddlewaretoken" value="([^"]+)"'),
            "fabric": fabric_id,
            "customer": field(form, r'name="customer"[^>]*>\s*<option value="([^"]+)"'),
            "submit_token": field(form, r'name="submit_token" value="([^"]+)"'),
            "template_id": field(form, r'<option value="([^"]+)" selected>'),
            "executor_ids": re.findall(r'name="executor_ids" value="([^"]+)"[^>]*checked', form),
            "pod_name": "via-gunicorn",
            "ssh_public_keys": SSH_KEY,
            "enable_volume_encryption": "on",
        }
        response = web.post("/rent/", params={"fabric": fabric_id}, data=data)
        assert response.status_code == 302
        detail = response.headers["Location"]
        deadline = time.monotonic() + 45
        status = ""
        while time.monotonic() < deadline and status != "ready":
            fragment = web.get(f"{detail}progress/", headers={"HX-Request": "true"}).text
            status = field(fragment, r'data-status="([^"]+)"')
            time.sleep(0.5)
        assert status == "ready"
        assert fragment.count("ssh root@") == 2
    assert len(simulator.ledger()) == 1
