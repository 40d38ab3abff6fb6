"""`LiumClient.deployment_estimate`: the documented answer becomes a `DeploymentEstimate`; anything else is
MalformedAnswer (never a made-up estimate)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from rentals import upstream
from tests.rentals.fakes import BASE_URL

GOOD = {
    "estimated_seconds": 65,
    "is_slow_machine": True,
    "warning_message": "Slow disk",
    "is_cached_template": False,
    "docker_image_size": 12_000_000_000,
}


def client_answering(body: Any, seen: list[httpx.Request] | None = None) -> upstream.LiumClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(200, content=body) if isinstance(body, bytes) else httpx.Response(200, json=body)

    return upstream.LiumClient(
        base_url=BASE_URL,
        auth=upstream.Auth(scheme="api_key", secret="sk-test"),
        http=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def test_the_documented_answer_is_read_and_the_ids_are_sent_as_query() -> None:
    seen: list[httpx.Request] = []
    estimate = client_answering(GOOD, seen).deployment_estimate("exec-1", "tpl 2")
    assert (estimate.seconds, estimate.slow, estimate.warning) == (65, True, "Slow disk")
    assert (estimate.cached_template, estimate.image_bytes) == (False, 12_000_000_000)
    assert seen[0].url.path.endswith("/executors/deployment-estimate")
    assert dict(seen[0].url.params) == {"executor_id": "exec-1", "template_id": "tpl 2"}


def test_only_the_two_fields_the_official_client_reads_are_required() -> None:
    estimate = client_answering({"estimated_seconds": 0, "is_slow_machine": False}).deployment_estimate("e", "t")
    assert (estimate.seconds, estimate.warning, estimate.cached_template, estimate.image_bytes) == (0, "", False, None)


@pytest.mark.parametrize(
    "change",
    [
        {"estimated_seconds": None},
        {"estimated_seconds": "65"},
        {"estimated_seconds": 6.5},
        {"estimated_seconds": True},
        {"estimated_seconds": -1},
        {"estimated_seconds": 10**9},
        {"is_slow_machine": None},
        {"is_slow_machine": "yes"},
        {"warning_message": 3},
        {"is_cached_template": 1},
        {"docker_image_size": "12 GB"},
        {"docker_image_size": -5},
    ],
)
def test_a_field_of_the_wrong_shape_is_a_malformed_answer(change: dict[str, Any]) -> None:
    with pytest.raises(upstream.MalformedAnswer):
        client_answering(GOOD | change).deployment_estimate("e", "t")


@pytest.mark.parametrize("body", [b"<html>busy</html>", b"", [GOOD], "65"])
def test_a_body_that_is_not_an_estimate_object_is_a_malformed_answer(body: Any) -> None:
    with pytest.raises(upstream.MalformedAnswer):
        client_answering(body).deployment_estimate("e", "t")


def test_a_short_budget_abandons_a_call_that_does_not_answer(settings: Any) -> None:
    settings.LIUM_TIMEOUT_SECONDS = 30
    release = threading.Event()

    def stall(request: httpx.Request) -> httpx.Response:
        release.wait(10)  # answers only once the test lets it (or after 10 s: then the budget was ignored)
        return httpx.Response(200, json=GOOD)

    client = upstream.LiumClient(
        base_url=BASE_URL,
        auth=upstream.Auth(scheme="api_key", secret="sk-test"),
        http=httpx.Client(transport=httpx.MockTransport(stall)),
    )
    try:
        with pytest.raises(upstream.UpstreamUnavailable):
            client.deployment_estimate("e", "t", budget_seconds=0.2)
    finally:
        release.set()
