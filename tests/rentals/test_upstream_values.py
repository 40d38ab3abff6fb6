"""Every read returns typed, checked values; an answer that does not parse is an error, never an empty result."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest

from rentals import upstream
from rentals.models import RentalEvent
from rentals.removal.deletion import rental_delete_cluster
from rentals.states import RentalStatus
from rentals.upstream.parse_offers import TemplateRow
from rentals.upstream.parse_pods import PodRow
from tests.rentals.fakes import BASE_URL, FakeUpstream, answer


def client_answering(body: Any, status: int = 200) -> upstream.LiumClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)

    return upstream.LiumClient(
        base_url=BASE_URL,
        auth=upstream.Auth(scheme="api_key", secret="sk-test"),
        http=httpx.Client(transport=httpx.MockTransport(handler)),
    )


# --- version and account -------------------------------------------------------------------------------------


def test_version_returns_the_feature_names() -> None:
    features = client_answering({"version": "1.2", "features": ["rent_idempotency", "run_record"]}).version()
    assert "rent_idempotency" in features and "rent_by_spec" not in features


def test_a_version_without_features_lists_none() -> None:
    assert "rent_idempotency" not in client_answering({"version": "1.2"}).version()


@pytest.mark.parametrize("body", [["rent_idempotency"], {"features": "rent_idempotency"}, {"features": [1]}, b"<html>"])
def test_an_unreadable_version_is_an_error_not_a_feature_list(body: Any) -> None:
    with pytest.raises(upstream.MalformedAnswer):
        client_answering(body).version()


@pytest.mark.parametrize(
    ("balance", "expected"),
    [(5000, Decimal(5000)), ("12.50", Decimal("12.50")), (-3.5, Decimal("-3.5")), (None, None), ("NaN", None)],
)
def test_me_returns_the_balance_as_a_decimal_or_none(balance: Any, expected: Decimal | None) -> None:
    account = client_answering({"id": "u-1", "email": "a@example.com", "balance": balance}).me()
    assert account.balance == expected and account.id == "u-1"


def test_an_account_answer_that_is_not_an_object_is_an_error() -> None:
    with pytest.raises(upstream.MalformedAnswer):
        client_answering([{"balance": 1}]).me()


@pytest.mark.django_db
def test_test_connection_fails_on_an_unreadable_version(acme, monkeypatch: pytest.MonkeyPatch) -> None:
    from rentals.upstream.credentials import credential_test_connection

    monkeypatch.setattr(upstream, "client_for", lambda credential: client_answering(b"<html>maintenance</html>"))
    report = credential_test_connection(credential=acme.default_credential)
    assert report.ok is False and "cannot be read" in report.message


@pytest.mark.django_db
def test_test_connection_says_when_no_balance_was_given(acme, monkeypatch: pytest.MonkeyPatch) -> None:
    from rentals.upstream.credentials import credential_test_connection

    monkeypatch.setattr(upstream, "client_for", lambda credential: client_answering({"features": []}))
    report = credential_test_connection(credential=acme.default_credential)
    assert report.ok is True
    assert "balance not given" in report.message and "WARNING: no rent_idempotency" in report.message


# --- pods ----------------------------------------------------------------------------------------------------


def test_a_pod_row_is_read_into_typed_fields() -> None:
    [row] = client_answering(
        [
            {
                "id": "p1",
                "pod_name": "train-1",
                "status": "RUNNING",
                "cluster_id": "cl-1",
                "cluster_node_index": 0,
                "cluster_overlay_ip": "10.42.0.1",
                "ssh_connect_cmd": "ssh root@198.51.100.7 -p 22001",
                "executor": {"id": "exec-a"},
                "phase": None,
                "estimated_ready_seconds": None,
                "price": 19.2,
                "gpu_count": "8",
                "created_at": "2026-12-01T10:00:00Z",
                "removal_scheduled_at": None,
                "jupyter_url": None,
                "ports_mapping": {"22": 22001},
            }
        ]
    ).list_pods()
    assert row == PodRow(
        id="p1",
        status="RUNNING",
        pod_name="train-1",
        cluster_id="cl-1",
        cluster_node_index=0,
        overlay_ip="10.42.0.1",
        ssh_connect_cmd="ssh root@198.51.100.7 -p 22001",
        executor_id="exec-a",
        price=Decimal("19.2000"),
        gpu_count=8,
        created_at=datetime(2026, 12, 1, 10, tzinfo=UTC),
        ports_mapping=((22, 22001),),
    )


def test_an_empty_listing_is_an_empty_list() -> None:
    assert client_answering([]).list_pods() == []


# --- delete --------------------------------------------------------------------------------------------------


def test_delete_returns_one_row_per_member() -> None:
    result = client_answering(
        {
            "cluster_id": "cl-1",
            "success": False,
            "message": "1 of 2 members failed to delete; call again to retry",
            "pods": [
                {"pod_id": "p1", "pod_name": "t", "cluster_node_index": 0, "success": True, "message": "started"},
                {"pod_id": "p2", "pod_name": "t", "cluster_node_index": 1, "success": False, "message": "unreachable"},
            ],
        }
    ).delete_cluster("cl-1")
    assert (result.cluster_id, result.success) == ("cl-1", False)
    assert [(row.pod_id, row.success, row.message) for row in result.rows] == [
        ("p1", True, "started"),
        ("p2", False, "unreachable"),
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"success": True, "pods": []},
        {"success": True},
        {"success": True, "pods": [{"pod_id": "p1"}]},
        {"success": True, "pods": [{"pod_id": "p" * 101, "success": True}]},
        [],
    ],
    ids=["no-rows", "no-pods", "row-without-success", "pod-id-too-long", "list"],
)
def test_a_delete_answer_without_usable_rows_is_an_error_never_a_removal(body: Any) -> None:
    with pytest.raises(upstream.MalformedAnswer):
        client_answering(body).delete_cluster("cl-1")


@pytest.fixture
def terminating(make_rental):  # type: ignore[no-untyped-def]
    return make_rental(status=RentalStatus.TERMINATING, cluster_id="cl-1", pod_ids=["p1", "p2"], possibly_sent=True)


@pytest.mark.django_db
def test_a_200_delete_without_rows_is_retried_and_not_recorded_as_accepted(terminating, fake_upstream) -> None:
    fake_upstream.script = [answer(200, {"success": True, "pods": []})]
    assert rental_delete_cluster(rental_id=terminating.pk) == "retry"
    terminating.refresh_from_db()
    assert terminating.status == RentalStatus.TERMINATING
    assert not terminating.events.filter(data__delete_accepted=True).exists()


@pytest.mark.django_db
def test_a_partly_failed_delete_is_accepted_and_called_again(terminating, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script = [
        answer(
            200,
            {
                "cluster_id": "cl-1",
                "success": False,
                "message": "1 of 2 members failed to delete; call again to retry",
                "pods": [
                    {"pod_id": "p1", "success": True, "message": "Pod deletion started"},
                    {"pod_id": "p2", "success": False, "message": "Failed to delete pod: executor unreachable"},
                ],
            },
        )
    ]
    assert rental_delete_cluster(rental_id=terminating.pk) == "retry"
    event = terminating.events.get(kind=RentalEvent.Kind.MEMBER)
    assert event.data["delete_accepted"] is True and event.data["success"] is False
    assert [row["pod_id"] for row in event.data["pods"]] == ["p1", "p2"]


@pytest.mark.django_db
def test_an_accepted_delete_moves_the_version_so_an_open_page_shows_each_members_result(
    terminating, fake_upstream: FakeUpstream
) -> None:
    # The progress section lists each member's removal result: an open page asks "anything newer than my version?"
    shown = terminating.version
    fake_upstream.script = [
        answer(
            200,
            {
                "cluster_id": "cl-1",
                "success": True,
                "pods": [{"pod_id": "p1", "success": True}, {"pod_id": "p2", "success": True}],
            },
        )
    ]
    assert rental_delete_cluster(rental_id=terminating.pk) == "started"
    terminating.refresh_from_db()
    assert terminating.version > shown


# --- offers and templates ------------------------------------------------------------------------------------


def test_offers_keep_only_nodes_and_fabrics_whose_ids_fit() -> None:
    fabrics = client_answering(
        [
            {
                "fabric_id": "fab-1",
                "fabric_type": None,
                "nodes": [
                    {"id": "n1", "gpu_count": "8", "price_per_gpu": "2.5", "executor_ip_address": "198.51.100.1"},
                    {"id": "n" * 101, "gpu_count": 8},
                    "not-a-node",
                ],
            },
            {"fabric_id": "f" * 301, "nodes": []},
            {"nodes": []},
        ]
    ).list_offers()
    assert [fabric.fabric_id for fabric in fabrics] == ["fab-1"]
    [node] = fabrics[0].nodes
    assert (node.id, node.gpu_count, node.price_per_hour, node.ip) == ("n1", 8, Decimal("20.0000"), "198.51.100.1")
    assert fabrics[0].fabric_type == "infiniband" and fabrics[0].node_count == 1


@pytest.mark.parametrize("body", [{"offers": []}, b"", "x"])
def test_an_unreadable_offer_listing_is_an_error_not_no_offers(body: Any) -> None:
    with pytest.raises(upstream.MalformedAnswer):
        client_answering(body).list_offers()


def test_templates_are_typed_and_rows_without_id_or_image_are_left_out() -> None:
    templates = client_answering(
        [
            {"id": "t1", "name": "Cluster", "docker_image": "daturaai/lium-cluster", "docker_image_tag": None},
            {"id": None, "docker_image": "daturaai/lium-cluster"},
            {"id": "t3", "name": "No image"},
        ]
    ).list_templates()
    assert templates == [
        TemplateRow(id="t1", name="Cluster", docker_image="daturaai/lium-cluster", docker_image_tag="latest")
    ]
