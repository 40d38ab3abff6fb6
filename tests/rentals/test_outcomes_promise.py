"""A backend without the idempotency promise: what may still be re-sent, and how the promise is asked for.

A connection never made and a 429 did not run the order, so those are retried on any backend, without asking
`GET /version`; an answer that was lost may have rented, so it is re-sent only to a backend that lists
`rent_idempotency`. The promise is cached: a yes for ten minutes, a no asked again at the next need.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.core.cache import caches
from django.core.cache.backends import locmem

from rentals import tasks
from rentals.idempotency_promise import idempotency_promise_for_display, upstream_promises_idempotency
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, FakeUpstream, error

pytestmark = pytest.mark.django_db


def attempt(rental: Rental, capture) -> None:  # type: ignore[no-untyped-def]
    with capture(execute=False):
        tasks.rental_send(rental.pk)
    rental.refresh_from_db()


def version_asks(fake: FakeUpstream) -> int:
    return sum(1 for r in fake.requests if r.method == "GET" and r.url.path.endswith("/version"))


def test_a_connection_never_made_is_retried_on_a_backend_without_the_promise(
    fake_upstream: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [httpx.ConnectError("connection refused")]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.RETRYING, "nothing reached Lium, so sending again cannot rent twice"
    assert version_asks(fake_upstream) == 0, "the promise is not asked for when it does not matter"


def test_a_429_is_retried_on_a_backend_without_the_promise_after_its_retry_after(
    fake_upstream: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(429, "rate_limited", "slow down", headers={"Retry-After": "30"})]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.RETRYING, "a 429 answered instead of running the order"
    assert rental.next_attempt_at is not None and (rental.next_attempt_at - clock.now).total_seconds() >= 30
    assert not rental.possibly_sent
    assert version_asks(fake_upstream) == 0


def test_a_lost_answer_on_a_backend_without_the_promise_is_unknown_not_retried(
    fake_upstream: FakeUpstream, make_rental, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    fake_upstream.script = [error(503)]

    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.UNKNOWN
    assert "does not list rent_idempotency" in rental.events.order_by("-pk").first().message  # type: ignore[union-attr]
    assert version_asks(fake_upstream) == 1


def test_a_rental_out_of_attempts_after_429s_only_failed_nothing_was_rented(
    fake_upstream: FakeUpstream, make_rental, engine_settings, clock: Clock, django_capture_on_commit_callbacks
) -> None:
    engine_settings.RENT_MAX_ATTEMPTS = 2
    rental = make_rental()
    fake_upstream.script = [error(429, "rate_limited"), error(429, "rate_limited")]

    attempt(rental, django_capture_on_commit_callbacks)
    clock.now = rental.next_attempt_at
    attempt(rental, django_capture_on_commit_callbacks)

    assert rental.status == RentalStatus.FAILED, "every answer was a 429: the order never ran"


def test_a_yes_is_remembered_so_the_next_claims_do_not_ask_again(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.features = ["rent_idempotency"]
    assert upstream_promises_idempotency(acme.default_credential) is True
    fake_upstream.features = []  # even if the backend changed its answer meanwhile, the yes holds for now
    assert upstream_promises_idempotency(acme.default_credential) is True
    assert version_asks(fake_upstream) == 1


def test_a_no_is_asked_again_next_time(acme, fake_upstream: FakeUpstream) -> None:
    assert upstream_promises_idempotency(acme.default_credential) is False
    fake_upstream.features = ["rent_idempotency"]  # the backend was upgraded
    assert upstream_promises_idempotency(acme.default_credential) is True
    assert version_asks(fake_upstream) == 2


def test_a_version_that_cannot_be_read_counts_as_no(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.features = ["rent_idempotency", 7]  # type: ignore[list-item]  # not a list of names
    assert upstream_promises_idempotency(acme.default_credential) is False


def test_a_page_remembers_a_no_for_a_while_instead_of_asking_at_every_view(acme, fake_upstream: FakeUpstream) -> None:
    assert idempotency_promise_for_display(acme.default_credential) is False
    fake_upstream.features = ["rent_idempotency"]
    assert idempotency_promise_for_display(acme.default_credential) is False, "the no is shown for a minute"
    assert version_asks(fake_upstream) == 1


def test_a_page_shows_a_yes_without_asking_again(acme, fake_upstream: FakeUpstream) -> None:
    fake_upstream.features = ["rent_idempotency"]
    assert idempotency_promise_for_display(acme.default_credential) is True
    assert idempotency_promise_for_display(acme.default_credential) is True
    assert version_asks(fake_upstream) == 1


class CacheClock:
    """`time` as the local-memory cache reads it, with `time()` moved by hand (nothing else sees it)."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def cache_clock(monkeypatch: pytest.MonkeyPatch) -> CacheClock:
    if not isinstance(caches["default"], locmem.LocMemCache):
        pytest.skip("only the local-memory cache's expiry can be moved by hand (Redis expires keys itself)")
    clock = CacheClock()
    monkeypatch.setattr(locmem, "time", clock)
    return clock


def test_a_yes_is_asked_again_after_ten_minutes(acme, fake_upstream: FakeUpstream, cache_clock: CacheClock) -> None:
    fake_upstream.features = ["rent_idempotency"]
    upstream_promises_idempotency(acme.default_credential)
    cache_clock.now += 599.5
    upstream_promises_idempotency(acme.default_credential)
    assert version_asks(fake_upstream) == 1, "still remembered just before ten minutes"
    cache_clock.now += 1
    fake_upstream.features = []  # withdrawn: a backend that stopped promising is believed within ten minutes
    assert upstream_promises_idempotency(acme.default_credential) is False
    assert version_asks(fake_upstream) == 2


def test_a_page_asks_again_a_minute_after_a_no(acme, fake_upstream: FakeUpstream, cache_clock: CacheClock) -> None:
    idempotency_promise_for_display(acme.default_credential)
    cache_clock.now += 59.5
    assert idempotency_promise_for_display(acme.default_credential) is False
    assert version_asks(fake_upstream) == 1
    cache_clock.now += 1
    fake_upstream.features = ["rent_idempotency"]
    assert idempotency_promise_for_display(acme.default_credential) is True
    assert version_asks(fake_upstream) == 2
