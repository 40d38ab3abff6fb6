"""Reading the account's events and the shared config: what cannot be read is skipped, never guessed."""

from __future__ import annotations

import pytest

from rentals.upstream.parse import Unparseable
from rentals.upstream.parse_events import account_event_listing, cluster_switch

ROW = {
    "created_at": "2030-01-01T00:00:01.000Z",
    "event_type": "pod-delete",
    "sub_event_type": "pod-delete.started",
    "detail": {"message": "Pod deletion started", "nested": {"a": 1}},
    "error": None,
    "pod_id": "p1",
    "pod_name": "train",
    "actor": {"auth": "session", "api_key_id": None, "api_key_name": None},
}


def test_rows_are_read_oldest_first_with_a_stable_digest() -> None:
    older = {**ROW, "created_at": "2030-01-01T00:00:00.000Z", "actor": None}
    events = account_event_listing([ROW, older])
    assert [event.created_at.second for event in events] == [0, 1]
    assert events[0].actor is None and events[1].actor == {"auth": "session", "api_key_id": "", "api_key_name": ""}
    assert events[1].detail["nested"] == '{"a": 1}'  # kept as text, never an unbounded structure
    assert account_event_listing([ROW])[0].digest == events[1].digest != events[0].digest


@pytest.mark.parametrize(
    "broken",
    [
        {**ROW, "created_at": "yesterday"},
        {**ROW, "created_at": "2030-01-01T00:00:00"},  # no zone: when is that?
        {**ROW, "pod_id": None},
        {**ROW, "pod_id": "p" * 500},
        {**ROW, "event_type": 7},
    ],
)
def test_a_row_without_a_usable_time_pod_or_type_is_skipped(broken: dict) -> None:
    assert account_event_listing([broken, ROW]) == account_event_listing([ROW])


def test_a_listing_that_is_not_a_list_is_unreadable() -> None:
    with pytest.raises(Unparseable):
        account_event_listing({"events": []})


@pytest.mark.parametrize(
    ("body", "reading"),
    [
        ({"multinode_clusters_enabled": False}, False),
        ({"multinode_clusters_enabled": True}, True),
        ({}, None),
        ({"multinode_clusters_enabled": "false"}, None),
        ({"multinode_clusters_enabled": 0}, None),
    ],
)
def test_only_a_boolean_is_a_reading_of_the_switch(body: dict, reading: bool | None) -> None:
    assert cluster_switch(body) is reading
