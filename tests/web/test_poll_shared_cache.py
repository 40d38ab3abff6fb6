"""Polls with a shared cache (CACHE_URL: Redis): the rental's state and the session are read from it.

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
        not settings.POLL_STATE_CACHE,
        reason="needs a shared cache: CACHE_URL is not set (make test's PostgreSQL + Redis pass sets it)",
    ),
]


def test_the_redis_cache_keeps_one_client_and_round_trips_values() -> None:
    # RedisCache._cache is private, so not in django-stubs.
    assert cache._cache.get_client() is cache._cache.get_client(), "no new client per call"  # type: ignore[attr-defined]
    cache.set("shared-cache-probe", {"a": 1})
    assert cache.get("shared-cache-probe") == {"a": 1}


def test_an_unchanged_poll_reads_no_database_once_the_state_is_cached(rental, alice, django_assert_num_queries) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    with django_assert_num_queries(1):  # the first poll reads the state and leaves it in the cache
        html = browser.get(url).content.decode()
    with django_assert_num_queries(0):
        html = browser.get(poller_url(html)).content.decode()
    assert html.startswith('<div id="poller"') and "Attempts" not in html


def test_a_committed_change_reaches_the_next_poll_at_once(rental, alice, django_capture_on_commit_callbacks) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    browser.get(url)  # the state is now cached
    with django_capture_on_commit_callbacks(execute=True):
        assert rental_transition(rental_id=rental.pk, from_status="queued", to_status="cancelled")
    html = browser.get(url).content.decode()
    assert 'hx-swap-oob="true"' in html and "Cancelled" in html, "the cached state was dropped on commit"


def test_logging_out_ends_the_poll_even_with_the_state_cached(rental, alice) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    browser.get(url)
    cookie = browser.cookies["sessionid"].value
    browser.post("/accounts/logout/")
    kept = Client()
    kept.cookies["sessionid"] = cookie
    answer = kept.get(url)
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
