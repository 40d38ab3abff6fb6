"""Reading the API's values at every bound: the last value a column holds is kept, the first past it is not.

A value kept wrongly is a write lost on PostgreSQL (too long) or a page that lies (a price of None); a value
refused wrongly hides a real node or price. Each reader is checked just inside and just outside its limits.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from rentals.models import Rental
from rentals.upstream import parse
from rentals.upstream.parse_pods import pod_row

# --- numbers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        (0, Decimal("0.0000")),
        ("0.5", Decimal("0.5000")),  # a sub-dollar price is a price, not None
        (0.25, Decimal("0.2500")),
        ("1.23456", Decimal("1.2346")),
        ("99999999.9999", parse.PRICE_MAX),
        ("-0.0001", None),
        ("100000000", None),
        ("99999999.99991", None),
        ("inf", None),
        ("NaN", None),
        ("ten", None),
        (True, None),
        ([1], None),
        (None, None),
    ],
)
def test_a_price_is_read_from_zero_up_to_the_columns_largest(raw: Any, read: Decimal | None) -> None:
    assert parse.price(raw) == read


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        (0, 0),
        (8, 8),
        (" 8 ", 8),
        ("8", 8),
        (2**31 - 1, 2**31 - 1),
        (2**31, None),
        (str(2**31), None),
        (-1, None),
        ("-1", None),
        ("8.0", None),
        (8.0, None),
        (True, None),
        (None, None),
    ],
)
def test_a_count_is_a_whole_number_that_fits_a_positive_integer_column(raw: Any, read: int | None) -> None:
    assert parse.count(raw) == read


def test_a_pods_ready_estimate_is_read_up_to_the_largest_count_its_column_holds() -> None:
    row = {"id": "p-1", "status": "PENDING"}
    assert pod_row({**row, "estimated_ready_seconds": 2**31 - 1}).eta_seconds == 2**31 - 1
    assert pod_row({**row, "estimated_ready_seconds": 2**31}).eta_seconds is None
    assert pod_row({**row, "estimated_ready_seconds": 0}).eta_seconds == 0


def test_a_count_has_its_own_maximum_when_given() -> None:
    assert parse.count(4, maximum=4) == 4
    assert parse.count(5, maximum=4) is None


@pytest.mark.parametrize(("raw", "read"), [("-12.5", Decimal("-12.5")), (3, Decimal(3)), ("inf", None), (False, None)])
def test_money_may_be_negative_but_is_finite(raw: Any, read: Decimal | None) -> None:
    assert parse.money(raw) == read


# --- identifiers and text ----------------------------------------------------------------------------------


def test_an_identifier_of_exactly_its_columns_length_is_kept_one_more_is_refused() -> None:
    assert parse.ident("a" * 10, 10) == "a" * 10
    assert parse.ident("a" * 11, 10) is None
    assert parse.ident("", 10) is None
    assert parse.ident("a\nb", 10) is None
    assert parse.ident(12, 10) is None


def test_the_limits_are_the_columns_own_and_a_column_without_one_is_refused() -> None:
    assert (parse.POD_ID_MAX, parse.CLUSTER_ID_MAX, parse.SSH_COMMAND_MAX) == (100, 200, 300)
    with pytest.raises(ImproperlyConfigured, match="request_body"):
        parse.column_length(Rental, "request_body")  # binary: no length a parser could check against


def test_codes_and_request_ids_that_do_not_fit_are_dropped_not_cut() -> None:
    assert parse.code("c" * parse.CODE_MAX) == "c" * parse.CODE_MAX
    assert parse.code("c" * (parse.CODE_MAX + 1)) == ""
    assert parse.request_id("r" * parse.REQUEST_ID_MAX) == "r" * parse.REQUEST_ID_MAX
    assert parse.request_id("r" * (parse.REQUEST_ID_MAX + 1)) == ""


@pytest.mark.parametrize(("raw", "read"), [(None, ""), ({"a": 1}, ""), ([1], ""), (5, "5"), ("x" * 2001, "x" * 2000)])
def test_free_text_is_cut_never_refused(raw: Any, read: str) -> None:
    assert parse.text(raw) == read


def test_a_timestamp_of_64_characters_is_read_one_of_65_is_not() -> None:
    base = "2030-01-01T00:00:00.{}+00:00"
    at_limit = base.format("1" * (64 - len(base.format(""))))
    past_limit = base.format("1" * (65 - len(base.format(""))))
    assert len(at_limit) == 64 and parse.timestamp(at_limit) is not None
    assert len(past_limit) == 65 and parse.timestamp(past_limit) is None
    assert parse.timestamp("2030-01-01T00:00:00") is None, "a time without its zone is not read"
    assert parse.timestamp("2030-01-01T00:00:00Z") is not None
    assert parse.timestamp("yesterday") is None
    assert parse.timestamp(1_700_000_000) is None


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        ("255.255.255.255", "255.255.255.255"),  # 15 characters, the longest
        ("10.0.0.1", "10.0.0.1"),
        ("256.1.1.1", ""),
        ("::1", ""),
        (" 10.0.0.1", ""),
        ("10.0.0.1.", ""),
        (167772161, ""),
    ],
)
def test_an_ipv4_address_is_read_up_to_15_characters(raw: Any, read: str) -> None:
    assert parse.ipv4(raw) == read


# --- SSH lines -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("ssh root@10.0.0.1 -p 65535", True),
        ("ssh root@10.0.0.1 -p 1", True),
        ("ssh root@10.0.0.1", True),
        ("ssh root@10.0.0.1 -p 65536", False),
        ("ssh root@10.0.0.1 -p 0", False),
        ("ssh root@-oProxyCommand=x", False),
        ("ssh root@10.0.0.1; rm -rf /", False),
        (None, False),
    ],
)
def test_an_ssh_line_has_the_documented_form_and_a_port_up_to_65535(line: Any, kept: bool) -> None:
    assert parse.ssh_command(line) == (line if kept else "")


def test_the_longest_ssh_line_of_the_documented_form_is_kept_and_fits_its_column() -> None:
    longest = "ssh " + "u" * 32 + "@" + "h" * 253 + " -p 65535"  # the longest user, host name and port
    assert len(longest) <= parse.SSH_COMMAND_MAX
    assert parse.ssh_command(longest) == longest
    assert parse.ssh_parts(longest) == ("u" * 32, "h" * 253, 65535)
    assert parse.ssh_command("ssh " + "u" * 33 + "@" + "h" * 253) == "", "a user name longer than 32 characters"
    assert parse.ssh_command("ssh root@" + "h" * 5000) == ""


def test_the_parts_of_an_ssh_line_default_to_port_22() -> None:
    assert parse.ssh_parts("ssh root@10.0.0.1") == ("root", "10.0.0.1", 22)
    assert parse.ssh_parts("ssh ubuntu@node-1 -p 2222") == ("ubuntu", "node-1", 2222)
    assert parse.ssh_parts("ssh root@10.0.0.1 -p 70000") is None
