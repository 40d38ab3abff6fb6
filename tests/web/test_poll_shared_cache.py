"""Polls with a shared cache (CACHE_URL: Redis), where sessions are read from it (`cached_db`).

These run in `make test`'s PostgreSQL + Redis pass, which sets CACHE_URL to a real Redis database.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client

from rentals.transitions import rental_transition
from tests.web.polls import logged_in, poller_url

pytestmark = [
    pytest.mark.redis,
    pytest.mark.django_db,
    pytest.mark.skipif(
        not settings.CACHE_URL,
        reason="needs a shared cache: CACHE_URL is not set (make test's PostgreSQL + Redis pass sets it)",
    ),
]


def test_the_redis_cache_round_trips_values() -> None:
    cache.set("shared-cache-probe", {"a": 1})
    assert cache.get("shared-cache-probe") == {"a": 1}


def test_a_committed_change_reaches_the_next_poll_at_once(rental, alice, django_capture_on_commit_callbacks) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    assert browser.get(url).status_code == 204
    with django_capture_on_commit_callbacks(execute=True):
        assert rental_transition(rental_id=rental.pk, from_status="queued", to_status="cancelled")
    html = browser.get(url).content.decode()
    assert 'hx-swap-oob="true"' in html and "Cancelled" in html, "a write needs no cache to forget"


def test_logging_out_ends_the_poll_with_the_session_cached(rental, alice) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    browser.get(url)
    cookie = browser.cookies["sessionid"].value
    browser.post("/accounts/logout/")
    kept = Client()
    kept.cookies["sessionid"] = cookie
    answer = kept.get(url)
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
