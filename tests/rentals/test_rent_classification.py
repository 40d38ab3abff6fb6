"""Every rent answer is classified by what it proves, through the real client over `httpx.MockTransport`."""

from __future__ import annotations

import json

import httpx
import pytest

from rentals import upstream
from rentals.upstream import Classification as C
from tests.rentals.fakes import BASE_URL, REPLAYED, answer, error, rented

BODY = json.dumps({"executor_uuids": ["exec-a", "exec-b"], "pod_name": "train-1"}, sort_keys=True).encode()
KEY = "5b0f6a0e-1111-4c9a-9a55-0d1c1a2b3c4d"


def rent(step: httpx.Response | Exception, *, customer_ref: str | None = "acme"):  # type: ignore[no-untyped-def]
    """Send one rent through a client whose transport answers with `step`; return (result, requests)."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        sent.append(request)
        if isinstance(step, Exception):
            raise step
        return step

    client = upstream.LiumClient(
        base_url=BASE_URL,
        auth=upstream.Auth(scheme="api_key", secret="sk-secret"),
        http=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    result = client.rent_cluster(body=BODY, idempotency_key=KEY, customer_ref=customer_ref)
    return result, sent


# --- confirmed ---------------------------------------------------------------------------------------------


def test_a_2xx_with_pods_is_confirmed_with_its_pods_cluster_and_request_id() -> None:
    result, sent = rent(rented(pod_ids=["p1", "p2"], cluster_id="cl-9"))
    assert result.classification == C.CONFIRMED
    assert result.pod_ids == ["p1", "p2"] and result.cluster_id == "cl-9"
    assert result.request_id == "req-ok" and result.http_status == 200 and not result.replayed
    assert len(sent) == 1


@pytest.mark.parametrize("status", [200, 201, 202])
def test_a_2xx_that_does_not_say_success_false_is_confirmed(status: int) -> None:
    result, _ = rent(answer(status, {"pod_ids": ["p1"]}))
    assert result.classification == C.CONFIRMED and result.pod_ids == ["p1"]


def test_a_replayed_2xx_is_confirmed_and_says_it_was_a_replay() -> None:
    result, _ = rent(rented(headers=REPLAYED))
    assert result.classification == C.CONFIRMED and result.replayed is True


def test_a_2xx_object_without_pods_or_cluster_is_confirmed_and_the_members_are_found_later() -> None:
    result, _ = rent(answer(200, {"message": "Cluster rented"}))
    assert result.classification == C.CONFIRMED and result.pod_ids == [] and result.cluster_id == ""


@pytest.mark.parametrize(
    "content",
    [b"<html>Down for maintenance</html>", b"", b"[]", b'"ok"', b"null", b'{"pod_ids": ["p1"'],
    ids=["html", "empty", "list", "string", "null", "truncated"],
)
def test_a_2xx_whose_body_cannot_be_read_is_inconclusive_never_confirmed(content: bytes) -> None:
    # The order may or may not have been taken: the engine retries with the same key (or settles unknown).
    result, _ = rent(httpx.Response(200, content=content, headers={"X-Request-Id": "req-html"}))
    assert result.classification == C.INCONCLUSIVE
    assert result.http_status == 200 and result.pod_ids == [] and result.request_id == "req-html"


@pytest.mark.parametrize(
    "body",
    [
        {"success": "yes", "pod_ids": ["p1"]},
        {"success": 1, "pod_ids": ["p1"]},
        {"success": True, "pod_ids": "p1,p2"},
        {"success": True, "pod_ids": [1, 2]},
        {"success": True, "pod_ids": [{"id": "p1"}]},
        {"success": True, "pod_ids": ["p1", ""]},
        {"success": True, "pod_ids": ["p" * 101]},
        {"success": True, "pod_ids": ["p1\nX-Evil: 1"]},
        {"success": True, "pod_ids": ["p1"], "cluster_id": "c" * 201},
        {"success": True, "pod_ids": ["p1"], "cluster_id": {"id": "cl-1"}},
    ],
    ids=[
        "success-string",
        "success-number",
        "pods-string",
        "pods-numbers",
        "pods-objects",
        "pod-empty",
        "pod-too-long",
        "pod-control-chars",
        "cluster-too-long",
        "cluster-object",
    ],
)
def test_a_2xx_with_malformed_success_pods_or_cluster_is_inconclusive(body: dict) -> None:
    result, _ = rent(answer(200, body))
    assert result.classification == C.INCONCLUSIVE
    assert result.pod_ids == [] and result.cluster_id == ""


def test_the_longest_ids_that_fit_their_columns_are_kept_whole() -> None:
    result, _ = rent(rented(pod_ids=["p" * 100, "q" * 100], cluster_id="c" * 200))
    assert result.classification == C.CONFIRMED
    assert result.pod_ids == ["p" * 100, "q" * 100] and result.cluster_id == "c" * 200


@pytest.mark.parametrize("step", ["ok", "refused", "error"])
def test_an_over_long_request_id_is_dropped_not_cut_into_another_id(step: str) -> None:
    long_id = "r" * 101
    if step == "ok":
        response = rented(headers={"X-Request-Id": long_id})
    elif step == "refused":
        response = error(400, "bad_request", request_id=long_id)
    else:
        response = httpx.Response(503, content=b"busy", headers={"X-Request-Id": long_id})
    result, _ = rent(response)
    assert result.request_id == ""


def test_error_text_is_cut_to_its_column_and_an_over_long_code_is_dropped() -> None:
    result, _ = rent(
        httpx.Response(
            400,
            json={"error": {"code": "c" * 101, "message": "m" * 5000, "hint": "h" * 5000, "request_id": "req-2"}},
        )
    )
    assert result.classification == C.REFUSED
    assert result.error_code == "" and result.request_id == "req-2"
    assert len(result.message) == 2000 and len(result.hint) == 2000


# --- refused -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "bad_request"),
        (401, ""),
        (402, "API_KEY_BUDGET_EXCEEDED"),
        (403, "insufficient_balance"),
        (404, ""),
        (409, "price_changed"),  # a stored 409 that is not one of the two idempotency codes
        (409, ""),
        (422, "validation_error"),
        (400, ""),
    ],
)
def test_a_4xx_other_than_429_and_the_idempotency_codes_is_a_refusal(status: int, code: str) -> None:
    result, _ = rent(error(status, code, "Not possible", request_id="req-77"))
    assert result.classification == C.REFUSED
    assert result.http_status == status and result.error_code == code
    assert result.message == "Not possible" and result.request_id == "req-77"
    assert result.replayed is False


def test_a_refusal_notes_whether_it_was_the_replayed_first_answer() -> None:
    fresh, _ = rent(error(403, "insufficient_balance"))
    replayed, _ = rent(error(403, "insufficient_balance", headers=REPLAYED))
    assert (fresh.classification, fresh.replayed) == (C.REFUSED, False)
    assert (replayed.classification, replayed.replayed) == (C.REFUSED, True)


def test_a_2xx_with_success_false_is_a_refusal() -> None:
    result, _ = rent(answer(200, {"success": False, "message": "Rentals are paused"}, headers=REPLAYED))
    assert result.classification == C.REFUSED
    assert result.message == "Rentals are paused" and result.replayed is True and result.pod_ids == []


def test_an_older_servers_plain_detail_is_read_as_the_message() -> None:
    result, _ = rent(
        httpx.Response(400, json={"detail": "Executor exec-a is not free"}, headers={"X-Request-Id": "req-hdr"})
    )
    assert result.classification == C.REFUSED
    assert result.message == "Executor exec-a is not free" and result.request_id == "req-hdr"


# --- inconclusive ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_is_inconclusive(status: int) -> None:
    result, _ = rent(error(status, "internal", "Boom"))
    assert result.classification == C.INCONCLUSIVE and result.http_status == status


def test_a_429_is_inconclusive_and_carries_retry_after_in_seconds() -> None:
    result, _ = rent(error(429, "rate_limited", headers={"Retry-After": "7"}))
    assert result.classification == C.INCONCLUSIVE and result.retry_after == 7.0


def test_a_429_with_an_http_date_retry_after_is_inconclusive_without_a_wait() -> None:
    result, _ = rent(error(429, headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}))
    assert result.classification == C.INCONCLUSIVE and result.retry_after is None


@pytest.mark.parametrize("headers", [{}, REPLAYED], ids=["fresh", "replayed"])
def test_409_idempotency_in_progress_is_inconclusive_even_when_replayed(headers: dict[str, str]) -> None:
    result, _ = rent(error(409, "idempotency_in_progress", headers=headers))
    assert result.classification == C.INCONCLUSIVE and result.error_code == "idempotency_in_progress"


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("read timed out"),
        httpx.WriteTimeout("write timed out"),
        httpx.ReadError("connection reset by peer"),
        httpx.RemoteProtocolError("server disconnected without sending a response"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_losing_the_answer_after_the_request_may_have_left_is_inconclusive(exc: Exception) -> None:
    result, sent = rent(exc)
    assert result.classification == C.INCONCLUSIVE and result.http_status is None
    assert len(sent) == 1


# --- never sent --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("connection refused"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.PoolTimeout("no connection free"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_failing_before_any_byte_left_is_never_sent(exc: Exception) -> None:
    result, _ = rent(exc)
    assert result.classification == C.NEVER_SENT
    assert "could not be reached" in result.message or type(exc).__name__ in result.message


# --- outcome unknown ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, REPLAYED], ids=["fresh", "replayed"])
def test_409_idempotency_outcome_unknown_is_outcome_unknown(headers: dict[str, str]) -> None:
    result, _ = rent(error(409, "idempotency_outcome_unknown", "Unknown", headers=headers))
    assert result.classification == C.OUTCOME_UNKNOWN and result.key_reused is False


def test_422_idempotency_key_reused_is_outcome_unknown_and_flagged_as_our_defect() -> None:
    result, _ = rent(error(422, "idempotency_key_reused", "Key reused with a different body"))
    assert result.classification == C.OUTCOME_UNKNOWN and result.key_reused is True


# --- what is sent ------------------------------------------------------------------------------------------


def test_the_rent_sends_the_stored_bytes_key_customer_ref_and_credential() -> None:
    _, sent = rent(rented())
    request = sent[0]
    assert request.method == "POST" and str(request.url) == BASE_URL + "/executors/cluster/rent"
    assert request.content == BODY
    assert request.headers["Idempotency-Key"] == KEY
    assert request.headers["X-Customer-Ref"] == "acme"
    assert request.headers["X-API-Key"] == "sk-secret"
    assert request.headers["Content-Type"] == "application/json"


def test_no_customer_ref_header_is_sent_when_the_rental_has_none() -> None:
    _, sent = rent(rented(), customer_ref=None)
    assert "X-Customer-Ref" not in sent[0].headers


def test_rent_classify_without_a_response_or_error_is_inconclusive() -> None:
    # Defensive: something stopped the call but we do not know what; it may have left.
    assert upstream.rent_classify(None, None).classification == C.INCONCLUSIVE
