"""The client's transport: no cookie shared between credentials, one overall deadline per call, capped bodies."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from rentals import upstream
from rentals.upstream import Classification as C
from tests.rentals.fakes import BASE_URL, rented

BODY = b'{"executor_uuids":["exec-a","exec-b"],"pod_name":"train-1"}'
KEY = "7c2d0a4e-3333-4c9a-9a55-0d1c1a2b3c4d"


def client(http: httpx.Client, secret: str = "sk-a") -> upstream.LiumClient:  # noqa: S107 (a test key)
    return upstream.LiumClient(base_url=BASE_URL, auth=upstream.Auth(scheme="api_key", secret=secret), http=http)


# --- cookies -------------------------------------------------------------------------------------------------


def test_a_cookie_set_for_one_credential_is_never_sent_with_another() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=[], headers={"Set-Cookie": "session=of-credential-a; Path=/"})

    http = upstream.new_http_client(transport=httpx.MockTransport(handler))
    client(http, "sk-a").list_pods()
    client(http, "sk-b").list_pods()
    assert [r.headers.get("X-API-Key") for r in sent] == ["sk-a", "sk-b"]
    assert "Cookie" not in sent[1].headers
    assert len(http.cookies) == 0


def test_the_shared_client_keeps_no_cookies(settings) -> None:  # type: ignore[no-untyped-def]
    http = upstream.shared_http_client()
    http.cookies.extract_cookies(
        httpx.Response(200, headers={"Set-Cookie": "a=b; Path=/"}, request=httpx.Request("GET", BASE_URL + "/pods"))
    )
    assert len(http.cookies) == 0


# --- one deadline per call -----------------------------------------------------------------------------------


class Trickle(httpx.SyncByteStream):
    """A body that arrives one byte every `pause` seconds; `sent` counts the bytes the client took."""

    def __init__(self, body: bytes, pause: float) -> None:
        self.body = body
        self.pause = pause
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        for byte in self.body:
            time.sleep(self.pause)
            self.sent += 1
            yield bytes([byte])


@pytest.fixture
def tiny_deadline(settings):  # type: ignore[no-untyped-def]
    settings.LIUM_TIMEOUT_SECONDS = 0.3
    return settings


def test_a_body_that_trickles_in_is_abandoned_at_the_deadline(tiny_deadline) -> None:
    trickle = Trickle(b"[" + b" " * 400 + b"]", pause=0.05)  # 20 s to the end; the deadline is 0.3 s

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=trickle)

    with pytest.raises(upstream.UpstreamUnavailable, match="in time"):
        client(httpx.Client(transport=httpx.MockTransport(handler))).list_pods()
    # Given up part-way, not after the whole body (bytes, not seconds: a busy machine cannot make it flaky).
    assert trickle.sent < len(trickle.body) // 2


def test_a_rent_whose_answer_trickles_past_the_deadline_is_inconclusive(tiny_deadline) -> None:
    trickle = Trickle(rented().content + b" " * 400, pause=0.05)  # a confirmation, whole only after 20 s

    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        return httpx.Response(200, stream=trickle)

    result = client(httpx.Client(transport=httpx.MockTransport(handler))).rent_cluster(
        body=BODY, idempotency_key=KEY, customer_ref=None
    )
    assert result.classification == C.INCONCLUSIVE and result.pod_ids == []
    assert trickle.sent < len(trickle.body) // 2


def test_slow_redirect_hops_share_one_deadline(tiny_deadline) -> None:
    hops: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hops.append(str(request.url))
        time.sleep(0.1)
        return httpx.Response(307, headers={"Location": f"{BASE_URL}/pods?hop={len(hops)}"})

    with pytest.raises(upstream.UpstreamUnavailable, match="in time"):
        client(httpx.Client(transport=httpx.MockTransport(handler))).list_pods()
    # 0.1 s a hop against one 0.3 s deadline: a few hops (a deadline per hop would follow all 20 redirects).
    assert len(hops) < 5


def test_a_prompt_answer_is_unaffected_by_the_deadline(tiny_deadline) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[])

    assert client(httpx.Client(transport=httpx.MockTransport(handler))).list_pods() == []


# --- capped bodies -------------------------------------------------------------------------------------------


def test_an_over_large_listing_is_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "LISTING_BODY_MAX", 1000)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"[" + b" " * 2000 + b"]")

    with pytest.raises(upstream.MalformedAnswer):
        client(httpx.Client(transport=httpx.MockTransport(handler))).list_templates()


def test_a_pod_listing_past_its_byte_cap_is_refused(settings, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.POD_LISTING_MAX_PODS = 2
    monkeypatch.setattr(upstream, "POD_ROW_BYTES_MAX", 500)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"[" + b" " * 2000 + b"]")

    with pytest.raises(upstream.ListingTooLarge):
        client(httpx.Client(transport=httpx.MockTransport(handler))).list_pods()


def test_an_over_large_rent_answer_is_inconclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "ANSWER_BODY_MAX", 1000)
    body = b'{"success": true, "pod_ids": ["p1", "p2"], "message": "' + b"x" * 2000 + b'"}'

    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        return httpx.Response(200, content=body)

    result = client(httpx.Client(transport=httpx.MockTransport(handler))).rent_cluster(
        body=BODY, idempotency_key=KEY, customer_ref=None
    )
    assert result.classification == C.INCONCLUSIVE and result.pod_ids == []


# --- the lease outlives the call -----------------------------------------------------------------------------


def test_settings_refuse_a_rent_lease_not_longer_than_the_call_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    from django.core.exceptions import ImproperlyConfigured

    import dashboard.settings_apps  # where the upstream and rent engine settings are read

    path = dashboard.settings_apps.__file__

    monkeypatch.setenv("LIUM_TIMEOUT_SECONDS", "30")
    monkeypatch.setenv("RENT_LEASE_SECONDS", "36")  # 30 s + the 6 s margin: not strictly more
    with pytest.raises(ImproperlyConfigured, match="RENT_LEASE_SECONDS"):
        runpy.run_path(path)
    monkeypatch.setenv("RENT_LEASE_SECONDS", "60")
    assert runpy.run_path(path)["RENT_LEASE_SECONDS"] == 60
    # The default (timeout + 30 s) always passes, whatever the timeout.
    monkeypatch.delenv("RENT_LEASE_SECONDS")
    for timeout in ("3", "30", "300"):
        monkeypatch.setenv("LIUM_TIMEOUT_SECONDS", timeout)
        assert runpy.run_path(path)["RENT_LEASE_SECONDS"] == int(timeout) + 30


# --- calls in flight -----------------------------------------------------------------------------------------


def test_the_shared_client_holds_as_many_calls_open_as_the_rent_caps_allow(settings) -> None:  # type: ignore[no-untyped-def]
    """A burst of slow rent calls all reach Lium together: the HTTP connection pool is no hidden third cap below
    RENT_INFLIGHT_PER_CREDENTIAL and RENT_INFLIGHT_GLOBAL (httpx's default pool opens 100 connections at most)."""
    calls = 150
    settings.RENT_INFLIGHT_PER_CREDENTIAL = settings.RENT_INFLIGHT_GLOBAL = calls
    together = threading.Barrier(calls, timeout=10)

    class AllAtOnce(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                together.wait()  # answers only once every call is open at the same time
                status = 200
            except threading.BrokenBarrierError:
                status = 503
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), AllAtOnce)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    http = upstream.new_http_client()
    url = f"http://127.0.0.1:{server.server_port}/pods"
    try:
        with ThreadPoolExecutor(max_workers=calls) as pool:
            statuses = list(pool.map(lambda _: http.get(url).status_code, range(calls)))
    finally:
        server.shutdown()
        http.close()
    assert statuses == [200] * calls, f"{statuses.count(503)} calls waited for a free connection"
