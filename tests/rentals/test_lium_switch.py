"""Lium's cluster switch: read by beat (false / absent / unreadable), queued rentals held, sent when it is back on,
and refused after the bounded wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from rentals import lium_switch, tasks, upstream
from rentals.explanations import rental_explanation
from rentals.models import RentalEvent
from rentals.states import RentalStatus
from tests.rentals.fakes import Clock, FakeUpstream, error, rented

pytestmark = pytest.mark.django_db


class SharedConfig:
    """`GET /v1/shared-config` at the transport: `answer` is what the next reading gets."""

    def __init__(self) -> None:
        self.answer: httpx.Response | Exception = httpx.Response(200, json={"multinode_clusters_enabled": True})
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def says(self, body: Any) -> None:
        self.answer = httpx.Response(200, json=body)


@pytest.fixture
def shared_config(monkeypatch: pytest.MonkeyPatch) -> SharedConfig:
    fake = SharedConfig()
    real = upstream.public_client

    def public_client(base_url: str, *, http: httpx.Client | None = None) -> upstream.LiumClient:
        return real(base_url, http=http or httpx.Client(transport=httpx.MockTransport(fake.handle)))

    monkeypatch.setattr(upstream, "public_client", public_client)
    return fake


def switched_off(shared_config: SharedConfig) -> None:
    shared_config.says({"machine_prices": {}, "multinode_clusters_enabled": False})
    tasks.cluster_switch_read()


def test_an_explicit_false_switches_renting_off_for_the_credentials_backend(shared_config, credential) -> None:
    switched_off(shared_config)
    assert lium_switch.cluster_renting_off_since(credential=credential) is not None
    [request] = shared_config.requests
    assert str(request.url) == "http://lium.invalid/api/v1/shared-config"
    assert "X-API-Key" not in request.headers and "Authorization" not in request.headers  # public: no credential


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, json={"machine_prices": {}}),  # absent (lium-core would default it off)
        httpx.Response(200, json={"multinode_clusters_enabled": "no"}),  # not a boolean
        httpx.Response(200, json={"multinode_clusters_enabled": True}),
        httpx.Response(500, text="oops"),
        httpx.Response(200, text="<html>"),
        httpx.ConnectError("refused"),
    ],
    ids=["absent", "not-boolean", "true", "5xx", "not-json", "unreachable"],
)
def test_only_an_explicit_false_blocks_renting(shared_config, credential, answer) -> None:
    switched_off(shared_config)
    shared_config.answer = answer
    tasks.cluster_switch_read()
    assert lium_switch.cluster_renting_off_since(credential=credential) is None


def test_a_reading_goes_stale_when_beat_stops_reading(shared_config, credential, clock: Clock, settings) -> None:
    switched_off(shared_config)
    clock.advance(seconds=lium_switch.STALE_AFTER_READS * settings.LIUM_SWITCH_READ_SECONDS + 1)
    assert lium_switch.cluster_renting_off_since(credential=credential) is None


def test_a_queued_rental_is_held_while_off_and_says_why_once(
    shared_config, make_rental, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    switched_off(shared_config)
    for _ in range(3):  # the sweeper's re-sends find it still held
        with django_capture_on_commit_callbacks(execute=True):
            assert tasks.rental_send(rental.pk) is None
    rental.refresh_from_db()
    assert rental.status == RentalStatus.QUEUED
    assert fake_upstream.rent_requests == []
    waiting = RentalEvent.objects.filter(rental=rental, message__startswith="Lium has switched cluster renting off")
    assert waiting.count() == 1
    assert rental.error_code == "cluster_renting_disabled" and "waiting" in rental.error_message


def test_a_held_rental_is_sent_once_the_switch_is_back_on(
    shared_config, make_rental, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    switched_off(shared_config)
    tasks.rental_send(rental.pk)
    shared_config.says({"multinode_clusters_enabled": True})
    tasks.cluster_switch_read()
    fake_upstream.script.append(rented())
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(rental.pk) == RentalStatus.RENTED
    rental.refresh_from_db()
    assert len(fake_upstream.rent_requests) == 1
    assert rental.error_code == ""  # the waiting notice is gone once it was sent


def test_a_held_rental_is_refused_after_the_bounded_wait(
    shared_config, make_rental, fake_upstream: FakeUpstream, clock: Clock, settings
) -> None:
    settings.LIUM_SWITCH_MAX_WAIT_SECONDS = 3600
    rental = make_rental()
    switched_off(shared_config)
    tasks.rental_send(rental.pk)
    for _ in range(59):  # beat reads it every minute, still off: the wait counts from when it was first read off
        clock.advance(minutes=1)
        tasks.cluster_switch_read()
    assert tasks.rental_send(rental.pk) is None
    clock.advance(minutes=1, seconds=1)
    tasks.cluster_switch_read()
    assert tasks.rental_send(rental.pk) == RentalStatus.REFUSED
    rental.refresh_from_db()
    assert rental.status == RentalStatus.REFUSED and fake_upstream.rent_requests == []
    assert rental.error_code == "cluster_renting_disabled"  # the page and the API say why
    last = RentalEvent.objects.filter(rental=rental, to_status=RentalStatus.REFUSED).get()
    assert "more than 1 h" in last.message and "Nothing was rented" in last.message
    # Nothing reached Lium: the banner (and the e-mail) must not say Lium refused it.
    told = rental_explanation(rental, now=clock.now).text
    assert "Lium refused" not in told and "was not sent to Lium" in told


def test_a_403_from_the_rent_call_while_the_switch_reads_on_is_a_refusal_as_today(
    shared_config, make_rental, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks
) -> None:
    rental = make_rental()
    tasks.cluster_switch_read()  # on
    fake_upstream.script.append(error(403, "multinode_clusters_disabled", "Multi-node cluster renting is switched off"))
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(rental.pk) == RentalStatus.REFUSED


def test_a_retrying_rental_is_not_held(shared_config, make_rental, fake_upstream: FakeUpstream, clock: Clock) -> None:
    rental = make_rental(
        status=RentalStatus.RETRYING, attempt_count=1, next_attempt_at=clock.now - timedelta(seconds=1)
    )
    switched_off(shared_config)
    fake_upstream.script.append(error(403, "multinode_clusters_disabled"))
    assert tasks.rental_send(rental.pk) == RentalStatus.REFUSED  # it may have reached Lium: Lium answers for it


def test_a_scheduled_rental_sent_while_off_waits_from_its_start_not_from_when_it_was_ordered(
    shared_config, make_rental, fake_upstream: FakeUpstream, clock: Clock, settings
) -> None:
    settings.LIUM_SWITCH_MAX_WAIT_SECONDS = 3600
    rental = make_rental(status=RentalStatus.QUEUED, start_at=clock.now + timedelta(hours=3))  # as beat sends it
    clock.advance(hours=1)
    switched_off(shared_config)
    for _ in range(120):  # off for two hours before its start time
        clock.advance(minutes=1)
        tasks.cluster_switch_read()
    assert tasks.rental_send(rental.pk) is None, "held, not refused at once"
    rental.refresh_from_db()
    assert rental.status == RentalStatus.QUEUED
