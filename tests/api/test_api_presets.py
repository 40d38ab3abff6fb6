"""`/api/v1/presets` and `/api/v1/watches`: scoped to the caller's customer, checked like the pages, refusals in the
API's envelope."""

from __future__ import annotations

import pytest

from presets.models import CapacityWatch, Preset
from tests.conftest import SSH_KEY

pytestmark = pytest.mark.django_db(transaction=True)

PRESET = {
    "name": "h100 pair",
    "gpu_type": "H100",
    "node_count": 2,
    "max_price_per_node_hour": "20",
    "pod_name": "train",
    "ssh_public_keys": [SSH_KEY],
    "termination_hours": 4,
}


@pytest.fixture(autouse=True)
def _no_broker(enqueued) -> None:  # type: ignore[no-untyped-def]
    """The demand signal is enqueued, not sent."""


def test_presets_are_made_listed_and_deleted_within_the_customer(api_client, make_key, alice, carol, bob) -> None:  # type: ignore[no-untyped-def]
    made = api_client(make_key(alice)).post("/presets", json=PRESET)
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["name"], body["customer"]["name"], body["max_price_per_node_hour"]) == (
        "h100 pair",
        "Acme Research",
        "20.0000",
    )
    assert body["ssh_public_keys"] == [SSH_KEY] and body["template_id"] is None
    assert [p["id"] for p in api_client(make_key(carol)).get("/presets").json()["items"]] == [body["id"]]
    assert api_client(make_key(bob)).get("/presets").json()["items"] == []
    assert api_client(make_key(bob)).delete(f"/presets/{body['id']}").status_code == 404
    assert api_client(make_key(carol)).delete(f"/presets/{body['id']}").status_code == 204
    assert not Preset.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"pod_name": "Not Valid"}, "pod_name"),
        ({"ssh_public_keys": ["nope"]}, "ssh_public_keys"),
        ({"node_count": 1}, "node_count"),
        ({"termination_hours": 0}, "termination_hours"),
        ({"fabric_type": "ethernet"}, "fabric_type"),
        ({"max_price_per_node_hour": "12345678901"}, "max_price_per_node_hour"),
        ({"customer": "Globex"}, "customer"),
    ],
)
def test_a_bad_preset_is_refused_naming_the_field(api_client, make_key, alice, globex, change, field) -> None:  # type: ignore[no-untyped-def]
    answer = api_client(make_key(alice)).post("/presets", json={**PRESET, **change})
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert error["error"]["code"] == "validation_error"
    assert field in [item["field"] for item in error["validation_errors"]]
    assert not Preset.objects.exists()


def test_a_duplicate_preset_name_is_refused(api_client, make_key, alice) -> None:  # type: ignore[no-untyped-def]
    client = api_client(make_key(alice))
    assert client.post("/presets", json=PRESET).status_code == 201
    again = client.post("/presets", json=PRESET)
    assert again.status_code == 422 and "already has a preset named" in again.json()["error"]["message"]


def test_changes_need_the_rent_scope(api_client, make_key, alice) -> None:  # type: ignore[no-untyped-def]
    reader = api_client(make_key(alice, scopes=("read",)))
    assert reader.post("/presets", json=PRESET).json()["error"]["code"] == "insufficient_scope"
    assert reader.post("/watches", json={"node_count": 2}).json()["error"]["code"] == "insufficient_scope"
    assert reader.get("/presets").status_code == 200


def test_watches_are_made_listed_and_cancelled(api_client, make_key, alice, bob, settings) -> None:  # type: ignore[no-untyped-def]
    client = api_client(make_key(alice))
    preset = client.post("/presets", json=PRESET).json()
    made = client.post("/watches", json={"preset": preset["id"], "auto_rent": True, "hours": 12})
    assert made.status_code == 201, made.text
    watch = made.json()
    assert (watch["status"], watch["node_count"], watch["gpu_type"], watch["auto_rent"]) == ("active", 2, "H100", True)
    assert [w["id"] for w in client.get("/watches").json()["items"]] == [watch["id"]]
    assert api_client(make_key(bob)).delete(f"/watches/{watch['id']}").status_code == 404
    assert client.delete(f"/watches/{watch['id']}").status_code == 204
    assert CapacityWatch.objects.get().status == "cancelled"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"node_count": 2, "auto_rent": True}, "auto_rent"),
        ({"node_count": 2, "hours": 10_000}, "hours"),
        ({"gpu_type": "H100"}, "node_count"),
        ({"node_count": 2, "preset": 999}, "preset"),
        ({"node_count": 65}, "node_count"),
    ],
)
def test_a_bad_watch_is_refused_naming_the_field(api_client, make_key, alice, body, field) -> None:  # type: ignore[no-untyped-def]
    answer = api_client(make_key(alice)).post("/watches", json=body)
    assert answer.status_code == 422, answer.text
    assert field in [item["field"] for item in answer.json()["validation_errors"]]
    assert not CapacityWatch.objects.exists()
