"""`LiumClient._send` follows redirects only within the API's origin, so the credential never leaves it."""

from __future__ import annotations

import httpx
import pytest

from rentals import upstream
from rentals.upstream import Classification as C
from tests.rentals.fakes import BASE_URL, rented

BODY = b'{"executor_uuids":["exec-a","exec-b"],"pod_name":"train-1"}'
KEY = "9a1c0a4e-2222-4c9a-9a55-0d1c1a2b3c4d"
DELETE_ROWS = {"success": True, "pods": [{"pod_id": "p1", "success": True, "message": "Pod deletion started"}]}


class Recorder:
    """A transport that answers each URL from a table and records every request it saw."""

    def __init__(self, routes: dict[str, httpx.Response]) -> None:
        self.routes = routes
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.sent.append(request)
        key = f"{request.method} {request.url}"
        if key in self.routes:
            return self.routes[key]
        return self.routes.get(str(request.url), httpx.Response(404, json={"detail": "no route"}))


def client(recorder: Recorder, *, scheme: str = "api_key", base_url: str = BASE_URL) -> upstream.LiumClient:
    return upstream.LiumClient(
        base_url=base_url,
        auth=upstream.Auth(scheme=scheme, secret="sk-secret"),
        http=httpx.Client(transport=httpx.MockTransport(recorder)),
    )


def redirect(status: int, location: str | None) -> httpx.Response:
    return httpx.Response(status, headers={"Location": location} if location is not None else {})


def secret_seen_by(request: httpx.Request) -> bool:
    return "sk-secret" in request.headers.get("X-API-Key", "") + request.headers.get("Authorization", "")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize(
    "location",
    [
        "https://evil.example/api/pods",  # another host
        "//evil.example/api/pods",  # protocol-relative: another host
        "https://lium.invalid/api/pods",  # same host, another scheme
        "http://lium.invalid:8443/api/pods",  # same host, another port
    ],
)
def test_a_cross_origin_redirect_is_never_followed_and_the_key_never_leaves(status: int, location: str) -> None:
    recorder = Recorder({BASE_URL + "/pods": redirect(status, location)})
    with pytest.raises(upstream.UnsafeRedirect):
        client(recorder).list_pods()
    assert len(recorder.sent) == 1, "nothing was re-sent anywhere"
    assert recorder.sent[0].url.host == "lium.invalid"


def test_a_bearer_token_is_not_sent_to_another_host_either() -> None:
    recorder = Recorder({BASE_URL + "/pods": redirect(302, "https://evil.example/steal")})
    with pytest.raises(upstream.UnsafeRedirect):
        client(recorder, scheme="bearer").list_pods()
    assert [r.url.host for r in recorder.sent] == ["lium.invalid"]
    assert recorder.sent[0].headers["Authorization"] == "Bearer sk-secret"
    assert "X-API-Key" not in recorder.sent[0].headers


def test_a_cross_origin_redirect_of_the_rent_is_inconclusive_and_the_body_is_not_resent() -> None:
    recorder = Recorder({BASE_URL + "/executors/cluster/rent": redirect(307, "https://evil.example/rent")})
    result = client(recorder).rent_cluster(body=BODY, idempotency_key=KEY, customer_ref=None)
    # The first request did reach the server, so it may have rented: retry with the same key later.
    assert result.classification == C.INCONCLUSIVE
    assert len(recorder.sent) == 1 and not any(r.url.host == "evil.example" for r in recorder.sent)


@pytest.mark.parametrize("status", [307, 308])
def test_a_same_origin_307_or_308_of_the_rent_resends_the_same_post_bytes_and_key(status: int) -> None:
    moved = BASE_URL + "/v2/executors/cluster/rent"
    recorder = Recorder(
        {
            BASE_URL + "/executors/cluster/rent": redirect(status, "/api/v2/executors/cluster/rent"),
            moved: rented(pod_ids=["p1", "p2"]),
        }
    )
    result = client(recorder).rent_cluster(body=BODY, idempotency_key=KEY, customer_ref="acme")
    assert result.classification == C.CONFIRMED and result.pod_ids == ["p1", "p2"]
    assert [str(r.url) for r in recorder.sent] == [BASE_URL + "/executors/cluster/rent", moved]
    second = recorder.sent[1]
    assert second.method == "POST" and second.content == BODY
    assert second.headers["Idempotency-Key"] == KEY and second.headers["X-Customer-Ref"] == "acme"
    assert secret_seen_by(second)


def test_five_same_origin_hops_are_followed() -> None:
    routes = {f"{BASE_URL}/hop{i}": redirect(302, f"/api/hop{i + 1}") for i in range(5)}
    routes[f"{BASE_URL}/hop5"] = httpx.Response(200, json=[{"id": "p1"}])
    recorder = Recorder(routes)
    assert client(recorder, base_url=BASE_URL)._call("GET", "/hop0").json() == [{"id": "p1"}]
    assert len(recorder.sent) == 6


def test_more_than_five_hops_are_refused() -> None:
    routes = {f"{BASE_URL}/hop{i}": redirect(302, f"/api/hop{i + 1}") for i in range(10)}
    recorder = Recorder(routes)
    with pytest.raises(upstream.UnsafeRedirect, match="More than 5 redirects"):
        client(recorder)._call("GET", "/hop0")
    assert len(recorder.sent) == 6, "the initial request and 5 followed hops; the 6th redirect is refused"


def test_a_redirect_without_location_is_refused() -> None:
    recorder = Recorder({BASE_URL + "/pods": redirect(302, None)})
    with pytest.raises(upstream.UnsafeRedirect):
        client(recorder).list_pods()
    assert len(recorder.sent) == 1


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_rent_is_never_reissued_as_a_get_and_its_redirect_proves_nothing(status: int) -> None:
    recorder = Recorder(
        {
            BASE_URL + "/executors/cluster/rent": redirect(status, "/api/orders/42"),
            BASE_URL + "/orders/42": rented(),
        }
    )
    result = client(recorder).rent_cluster(body=BODY, idempotency_key=KEY, customer_ref=None)
    assert [r.method for r in recorder.sent] == ["POST"], "the GET a browser would send is never sent"
    assert result.classification == "inconclusive", "a redirect is not a confirmation"


def test_a_303_turns_a_delete_into_a_get_without_a_body() -> None:
    recorder = Recorder(
        {
            "DELETE " + BASE_URL + "/clusters/cl-1": redirect(303, "/api/clusters/cl-1/status"),
            BASE_URL + "/clusters/cl-1/status": httpx.Response(200, json=DELETE_ROWS),
        }
    )
    client(recorder).delete_cluster("cl-1")
    follow = recorder.sent[1]
    assert follow.method == "GET" and follow.content == b"" and "Content-Type" not in follow.headers


def test_a_302_turns_a_delete_into_a_get_as_browsers_and_the_sdk_do() -> None:
    recorder = Recorder(
        {
            "DELETE " + BASE_URL + "/clusters/cl-1": redirect(302, "/api/clusters/cl-1/status"),
            BASE_URL + "/clusters/cl-1/status": httpx.Response(200, json=DELETE_ROWS),
        }
    )
    client(recorder).delete_cluster("cl-1")
    assert [r.method for r in recorder.sent] == ["DELETE", "GET"]


def test_a_301_keeps_a_get_a_get() -> None:
    recorder = Recorder(
        {
            BASE_URL + "/pods": redirect(301, "/api/v1/pods"),
            BASE_URL + "/v1/pods": httpx.Response(200, json=[]),
        }
    )
    assert client(recorder).list_pods() == []
    assert [r.method for r in recorder.sent] == ["GET", "GET"]


def test_a_rent_whose_redirect_hop_cannot_connect_is_inconclusive_not_never_sent() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        sent.append(request)
        if len(sent) == 1:
            return redirect(307, "/api/executors/cluster/rent-v2")
        raise httpx.ConnectError("connection refused")

    http = httpx.Client(transport=httpx.MockTransport(handler))
    result = upstream.LiumClient(
        base_url=BASE_URL, auth=upstream.Auth(scheme="api_key", secret="sk-secret"), http=http
    ).rent_cluster(body=BODY, idempotency_key=KEY, customer_ref=None)
    assert len(sent) == 2 and result.classification == C.INCONCLUSIVE, "the first request reached the server"
