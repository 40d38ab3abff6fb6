"""`Idempotency-Key` on POST /api/v1/rentals, with the upstream's semantics (upstream-api.md §12)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from api.errors import ApiError
from api.models import IdempotencyRecord
from rentals import offers as rental_offers
from rentals.models import Rental
from tests.conftest import SSH_KEY, Simulator

pytestmark = pytest.mark.django_db(transaction=True)


def order(simulator: Simulator, **changes: object) -> dict:
    body = {
        "fabric_id": simulator.offers()[0]["fabric_id"],
        "node_count": 2,
        "pod_name": "idem",
        "ssh_public_keys": [SSH_KEY],
    }
    return {**body, **changes}


def test_a_repeat_while_the_first_is_being_created_gets_409(
    simulator: Simulator, alice, make_key, api_client, monkeypatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    real_offers_get = rental_offers.offers_get

    def slow_offers_get(**kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(20)
        return real_offers_get(**kwargs)

    monkeypatch.setattr(rental_offers, "offers_get", slow_offers_get)
    body = order(simulator)
    key = make_key(alice)
    results: dict[str, object] = {}

    def first() -> None:
        results["first"] = api_client(key).post("/rentals", json=body, headers={"Idempotency-Key": "k-concurrent"})

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert entered.wait(20), "the first request reached validation"
        repeat = api_client(key).post("/rentals", json=body, headers={"Idempotency-Key": "k-concurrent"})
        assert repeat.status_code == 409, repeat.text
        assert repeat.json()["error"]["code"] == "idempotency_in_progress"
        assert repeat.headers["Retry-After"]
    finally:
        release.set()
        thread.join(30)
    first_response = results["first"]
    assert first_response.status_code == 201, first_response.text  # type: ignore[attr-defined]
    replay = api_client(key).post("/rentals", json=body, headers={"Idempotency-Key": "k-concurrent"})
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert Rental.objects.count() == 1


def test_a_refusal_is_stored_and_replayed_too(simulator: Simulator, alice, make_key, api_client) -> None:
    client = api_client(make_key(alice))
    body = order(simulator, pod_name="Not A Valid Name")
    first = client.post("/rentals", json=body, headers={"Idempotency-Key": "k-refused"})
    assert first.status_code == 422
    assert first.json()["error"]["code"] == "invalid_pod_name"
    again = client.post("/rentals", json=body, headers={"Idempotency-Key": "k-refused"})
    assert again.status_code == 422
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json(), "the stored answer, with the first request's request_id"
    assert again.headers["X-Request-Id"] != first.headers["X-Request-Id"]


def test_the_body_is_compared_byte_for_byte(simulator: Simulator, alice, make_key, api_client) -> None:
    client = api_client(make_key(alice))
    raw = b'{"fabric_id": "x", "node_count": 2, "pod_name": "a", "ssh_public_keys": []}'
    client.post("/rentals", content=raw, headers={"Idempotency-Key": "k-bytes"})
    reordered = b'{"node_count": 2, "fabric_id": "x", "pod_name": "a", "ssh_public_keys": []}'
    response = client.post("/rentals", content=reordered, headers={"Idempotency-Key": "k-bytes"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "idempotency_key_reused"


def test_keys_are_kept_per_user_and_for_24_hours(simulator: Simulator, alice, carol, make_key, api_client) -> None:
    body = order(simulator)
    first = api_client(make_key(alice)).post("/rentals", json=body, headers={"Idempotency-Key": "k-shared"})
    assert first.status_code == 201
    # The same key from another user is a new order.
    second = api_client(make_key(carol)).post(
        "/rentals", json=order(simulator), headers={"Idempotency-Key": "k-shared"}
    )
    assert second.status_code == 201 and "Idempotent-Replayed" not in second.headers
    assert second.json()["id"] != first.json()["id"]
    # Past the retention window the key is forgotten.
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=24, seconds=1))
    third = api_client(make_key(alice)).post("/rentals", json=order(simulator), headers={"Idempotency-Key": "k-shared"})
    assert third.status_code == 201 and "Idempotent-Replayed" not in third.headers
    assert Rental.objects.count() == 3


def test_an_abandoned_claim_is_taken_over_after_the_lock_expires(
    simulator: Simulator, alice, make_key, api_client
) -> None:
    import hashlib
    import json

    raw = json.dumps(order(simulator)).encode()
    stale = timezone.now() - timedelta(seconds=301)
    IdempotencyRecord.objects.create(
        user=alice, key="k-stale", body_sha256=hashlib.sha256(raw).hexdigest(), created_at=stale, locked_at=stale
    )
    response = api_client(make_key(alice)).post(
        "/rentals", content=raw, headers={"Idempotency-Key": "k-stale", "Content-Type": "application/json"}
    )
    assert response.status_code == 201, response.text
    assert IdempotencyRecord.objects.get(key="k-stale").status == "done"


def test_without_the_header_each_post_creates_a_rental(simulator: Simulator, alice, make_key, api_client) -> None:
    client = api_client(make_key(alice))
    offers = simulator.offers()[0]["nodes"]
    fabric_id = simulator.offers()[0]["fabric_id"]
    first = client.post(
        "/rentals", json=order(simulator, node_count=None, executor_ids=[offers[0]["id"], offers[1]["id"]])
    )
    assert first.status_code == 201, first.text
    assert first.json()["executor_ids"] == [offers[0]["id"], offers[1]["id"]]
    assert first.json()["fabric_id"] == fabric_id
    second = client.post(
        "/rentals", json=order(simulator, node_count=None, executor_ids=[offers[2]["id"], offers[3]["id"]])
    )
    assert second.status_code == 201, second.text
    assert Rental.objects.count() == 2


def test_an_invalid_key_header_is_refused(simulator: Simulator, alice, make_key, api_client) -> None:
    response = api_client(make_key(alice)).post("/rentals", json=order(simulator), headers={"Idempotency-Key": "a b"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_idempotency_key"


@pytest.mark.django_db
def test_a_request_that_lost_its_key_to_a_repeat_cannot_store_its_answer(alice) -> None:
    """A slow first request whose lock a repeat took over must roll back, not leave a second rental."""
    from datetime import timedelta

    from django.utils import timezone

    from api import idempotency
    from api.models import IdempotencyRecord

    first = idempotency.idempotency_begin(user=alice, key="k-1", body_sha256="a" * 64)
    assert isinstance(first, IdempotencyRecord), "a fresh key is claimed, not replayed"
    IdempotencyRecord.objects.filter(pk=first.pk).update(locked_at=timezone.now() - timedelta(hours=1))
    repeat = idempotency.idempotency_begin(user=alice, key="k-1", body_sha256="a" * 64)
    assert isinstance(repeat, IdempotencyRecord), "an unfinished key is claimed, not replayed"
    assert repeat.pk == first.pk, "the repeat took the stale key over"
    with pytest.raises(idempotency.LostIdempotencyLock):
        idempotency.idempotency_finish(record=first, status=201, body="{}")
    idempotency.idempotency_finish(record=repeat, status=201, body='{"id": "the repeat"}')
    assert IdempotencyRecord.objects.get(pk=first.pk).response_body == '{"id": "the repeat"}'


@pytest.mark.django_db
def test_a_request_that_lost_its_key_cannot_release_the_repeats_claim(alice) -> None:
    """First runs past its lock, a repeat takes the key over, the first fails: a third must not start afresh."""
    from api import idempotency

    first = idempotency.idempotency_begin(user=alice, key="k-1", body_sha256="a" * 64)
    assert isinstance(first, IdempotencyRecord), "a fresh key is claimed, not replayed"
    stale = timezone.now() - timedelta(hours=1)
    IdempotencyRecord.objects.filter(pk=first.pk).update(locked_at=stale)
    first.locked_at = stale
    repeat = idempotency.idempotency_begin(user=alice, key="k-1", body_sha256="a" * 64)
    assert isinstance(repeat, IdempotencyRecord), "an unfinished key is claimed, not replayed"
    assert repeat.pk == first.pk, "the repeat took the stale key over"
    idempotency.idempotency_abandon(record=first)  # the first request's transient failure
    with pytest.raises(ApiError) as third:
        idempotency.idempotency_begin(user=alice, key="k-1", body_sha256="a" * 64)
    assert third.value.status == 409, "the repeat still holds the key: a third request must wait, not rent again"
    idempotency.idempotency_abandon(record=repeat)
    assert not IdempotencyRecord.objects.filter(key="k-1").exists(), "the holder itself releases the key"
