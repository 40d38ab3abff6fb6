"""Reading the API's error envelopes, current and older: the words support and the customer read.

`error_detail` turns every shape the servers send (an `error` object or string, `detail` as a string, a list or
an object, `validation_errors`) into a code, a message, a hint and a request id.
"""

from __future__ import annotations

from typing import Any

import pytest

from rentals.upstream import parse


def read(body: Any, header_request_id: str = "", fallback: str = "HTTP 500") -> parse.ErrorDetail:
    return parse.error_detail(body, header_request_id=header_request_id, fallback=fallback)


def test_the_current_envelope_gives_code_message_hint_request_id_and_data() -> None:
    detail = read(
        {
            "error": {
                "code": "not_free",
                "message": "Node taken",
                "hint": "Pick another node",
                "request_id": "req-7",
                "data": {"executor_ids": ["e1"]},
            }
        },
        header_request_id="req-header",
    )
    assert detail == parse.ErrorDetail("not_free", "Node taken", "Pick another node", "req-7", {"executor_ids": ["e1"]})


def test_the_headers_request_id_stands_in_when_the_body_has_none() -> None:
    assert read({"error": {"code": "x", "message": "m"}}, header_request_id="req-h").request_id == "req-h"
    assert read(None, header_request_id="req-h").request_id == "req-h"


def test_an_error_string_is_the_message() -> None:
    assert read({"error": "Bad key"}).message == "Bad key"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"detail": "Not found"}, "Not found"),
        ({"message": "Old server says no"}, "Old server says no"),
        ({"error": {"message": "first"}, "detail": "second"}, "first"),
        ({"detail": [{"msg": "field required"}, {"loc": ["x"]}, "plain"]}, "field required; {'loc': ['x']}; plain"),
        ({"detail": {"message": "Quota reached", "limit": 4}}, "Quota reached"),
        (
            {"validation_errors": [{"field": "pod_name", "message": "too long"}, "bad executor"]},
            "pod_name: too long; bad executor",
        ),
        ({"detail": []}, "HTTP 500"),
        ({"detail": ""}, "HTTP 500"),
        ({"validation_errors": []}, "HTTP 500"),
        ({"validation_errors": "pod_name too long", "detail": "Not found"}, "Not found"),  # not a list: not read
        ({"detail": 404}, "HTTP 500"),  # neither text, a list nor an object: says nothing
        ({"error": "Bad key", "detail": {"limit": 4}}, "Bad key"),  # an object without a message keeps the error's
        ([1, 2], "HTTP 500"),
        ("text", "HTTP 500"),
    ],
)
def test_each_older_shape_gives_the_message_a_person_reads(body: Any, message: str) -> None:
    assert read(body).message == message


def test_a_detail_object_is_kept_as_the_data_when_the_error_had_none() -> None:
    assert read({"detail": {"message": "Quota reached", "limit": 4}}).data == {"message": "Quota reached", "limit": 4}
    with_data = read({"error": {"message": "m", "data": {"a": 1}}, "detail": {"message": "d"}})
    assert with_data.data == {"a": 1}
    assert with_data.message == "d"


def test_validation_errors_win_over_detail_and_list_at_most_20() -> None:
    errors = [f"e{i}" for i in range(25)]
    detail = read({"validation_errors": errors, "detail": "ignored"})
    assert detail.message == "; ".join(errors[:20])
    listed = read({"detail": [f"d{i}" for i in range(25)]})
    assert listed.message.count(";") == 19


def test_an_oversized_code_or_request_id_is_dropped_and_long_text_is_cut() -> None:
    detail = read(
        {
            "error": {
                "code": "c" * (parse.CODE_MAX + 1),
                "message": "m" * 2100,
                "hint": "h" * 2100,
                "request_id": "r" * (parse.REQUEST_ID_MAX + 1),
            }
        },
        header_request_id="req-h",
    )
    assert detail.code == "" and detail.request_id == "req-h"
    assert len(detail.message) == 2000 and len(detail.hint) == 2000


def test_a_null_message_or_hint_reads_as_nothing_and_the_fallback_speaks() -> None:
    detail = read({"error": {"code": "x", "message": None, "hint": None}})
    assert (detail.message, detail.hint) == ("HTTP 500", "")


# --- rent answers, version, account ---------------------------------------------------------------------------


def test_a_rent_answer_reads_its_pods_and_cluster() -> None:
    body = parse.rent_body({"success": True, "message": "ok", "pod_ids": ["p1", "p2"], "cluster_id": "c1"})
    assert body == parse.RentBody(success=True, message="ok", pod_ids=["p1", "p2"], cluster_id="c1")
    assert parse.rent_body({}) == parse.RentBody(success=None, message="", pod_ids=[], cluster_id="")


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"success": "yes"},
        {"pod_ids": "p1"},
        {"pod_ids": ["p" * (parse.POD_ID_MAX + 1)]},
        {"pod_ids": [7]},
        {"cluster_id": ""},
        {"cluster_id": "c" * (parse.CLUSTER_ID_MAX + 1)},
    ],
)
def test_a_rent_answer_that_is_not_the_documented_object_is_unparseable(body: Any) -> None:
    with pytest.raises(parse.Unparseable):
        parse.rent_body(body)


def test_the_longest_ids_fit() -> None:
    pod, cluster = "p" * parse.POD_ID_MAX, "c" * parse.CLUSTER_ID_MAX
    assert parse.rent_body({"pod_ids": [pod], "cluster_id": cluster}).pod_ids == [pod]


def test_features_are_names_cut_to_200_characters() -> None:
    features = parse.features({"features": ["rent_idempotency", "x" * 250]})
    assert "rent_idempotency" in features and "x" * 200 in features
    assert "anything" not in parse.features({})
    with pytest.raises(parse.Unparseable):
        parse.features({"features": ["a", 1]})


@pytest.mark.parametrize(
    ("body", "who"),
    [
        ({"id": "u-1", "email": "ops@example.com", "balance": "12.50"}, ("u-1", "ops@example.com", "12.50")),
        ({"id": 42, "email": 7, "balance": None}, ("42", "", None)),
        ({"id": True, "email": "", "balance": "x"}, ("", "", None)),
        ({"id": "i" * 250}, ("i" * 200, "", None)),
    ],
)
def test_the_account_is_read_as_far_as_the_dashboard_shows_it(body: dict[str, Any], who: tuple[Any, ...]) -> None:
    account = parse.account(body)
    balance = None if account.balance is None else str(account.balance)
    assert (account.id, account.email, balance) == who
