"""Keys, scopes and visibility: who may call what, and every refusal in the upstream's envelope."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from api.models import ApiKey
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY
from tests.matching import must_search

pytestmark = pytest.mark.django_db(transaction=True)


def assert_envelope(response, status: int, code: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False
    assert body["status_code"] == status
    assert set(body["error"]) == {"code", "message", "hint", "request_id"}
    assert body["error"]["request_id"] == response.headers["X-Request-Id"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body


@pytest.fixture
def alices_rental(alice):  # type: ignore[no-untyped-def]
    """A rental of Acme's, saved directly (nothing here needs it sent)."""
    order = RentOrder(fabric_id="fab-1", executor_ids=["n-1", "n-2"], pod_name="alice-job", public_keys=[SSH_KEY])
    return rental_submit(user=alice, customer=alice.memberships.get().customer, order=order, customer_ref="acme")


def test_no_key_bad_key_revoked_and_expired_keys_get_401(alice, make_key, api_client) -> None:
    assert_envelope(api_client().get("/rentals"), 401, "not_authenticated")
    assert_envelope(api_client("lcd_00000000_" + "x" * 43).get("/rentals"), 401, "invalid_api_key")
    assert_envelope(api_client("nonsense").get("/rentals"), 401, "invalid_api_key")
    good = make_key(alice)
    wrong_secret = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert_envelope(api_client(wrong_secret).get("/rentals"), 401, "invalid_api_key")

    revoked = make_key(alice)
    ApiKey.objects.filter(prefix=revoked.split("_")[1]).update(revoked_at=timezone.now())
    assert_envelope(api_client(revoked).get("/rentals"), 401, "api_key_revoked")

    expired = make_key(alice)
    ApiKey.objects.filter(prefix=expired.split("_")[1]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_envelope(api_client(expired).get("/rentals"), 401, "api_key_expired")

    assert api_client(good).get("/rentals").status_code == 200
    assert api_client(good, bearer=True).get("/rentals").status_code == 200


def test_last_used_is_written_at_most_once_a_minute(alice, make_key, api_client) -> None:
    text = make_key(alice)
    key = ApiKey.objects.get(prefix=text.split("_")[1])
    assert key.last_used_at is None
    client = api_client(text)
    client.get("/rentals")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    client.get("/rentals")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first, "no write on every request"
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    client.get("/rentals")
    last_used = ApiKey.objects.get(pk=key.pk).last_used_at
    assert last_used is not None and last_used > first - timedelta(minutes=1)


def test_failed_attempts_are_rate_limited_per_client_ip(limiter_clock, alice, make_key, api_client) -> None:
    bad = api_client("lcd_00000000_" + "y" * 43)
    for _ in range(10):
        assert_envelope(bad.get("/rentals"), 401, "invalid_api_key")
    limited = bad.get("/rentals")
    body = assert_envelope(limited, 429, "too_many_failed_attempts")
    assert 1 <= int(limited.headers["Retry-After"]) <= 61
    assert "Wait" in body["error"]["hint"]
    # A request without any key guesses nothing and is not counted.
    assert_envelope(api_client().get("/rentals"), 401, "not_authenticated")


def test_bad_keys_from_an_address_never_block_a_valid_key_from_it(limiter_clock, alice, make_key, api_client) -> None:
    bad = api_client("lcd_00000000_" + "y" * 43)
    for _ in range(10):
        bad.get("/rentals")
    assert_envelope(bad.get("/rentals"), 429, "too_many_failed_attempts")
    # Behind a proxy every customer shares the address: a valid key is served, only bad ones wait.
    assert api_client(make_key(alice)).get("/rentals").status_code == 200
    assert_envelope(bad.get("/rentals"), 429, "too_many_failed_attempts")


def test_failed_attempts_are_counted_per_real_client_behind_a_proxy(  # type: ignore[no-untyped-def]
    limiter_clock, alice, make_key, api_client, settings
) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    bad_key = "lcd_00000000_" + "y" * 43
    for _ in range(10):
        api_client(bad_key).get("/rentals", headers={"X-Forwarded-For": "198.51.100.2"})
    assert_envelope(api_client(bad_key).get("/rentals", headers={"X-Forwarded-For": "198.51.100.2"}), 429)
    (
        assert_envelope(
            api_client(bad_key).get("/rentals", headers={"X-Forwarded-For": "203.0.113.3"}), 401, "invalid_api_key"
        ),
        "another client behind the same proxy is not blocked",
    )


def test_failed_attempts_from_one_ipv6_64_prefix_count_as_one_client(  # type: ignore[no-untyped-def]
    limiter_clock, alice, make_key, api_client, settings
) -> None:
    # Whoever has a /64 can send from any of its addresses: rotating them must not buy fresh guesses.
    settings.TRUSTED_PROXY_COUNT = 1
    bad_key = "lcd_00000000_" + "y" * 43
    for n in range(10):
        api_client(bad_key).get("/rentals", headers={"X-Forwarded-For": f"2001:db8:5:6::{n + 1:x}"})
    assert_envelope(api_client(bad_key).get("/rentals", headers={"X-Forwarded-For": "2001:db8:5:6:ffff::1"}), 429)
    assert_envelope(api_client(bad_key).get("/rentals", headers={"X-Forwarded-For": "2001:db8:5:7::1"}), 401)


def test_each_user_has_a_request_budget_per_minute(limiter_clock, alice, bob, make_key, api_client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_RATE_PER_MINUTE = 3
    client = api_client(make_key(alice))
    assert [client.get("/rentals").status_code for _ in range(3)] == [200, 200, 200]
    limited = client.get("/rentals")
    assert_envelope(limited, 429, "rate_limited")
    assert int(limited.headers["Retry-After"]) >= 1
    assert_envelope(api_client(make_key(alice)).get("/rentals"), 429), "the budget is the user's, not the key's"
    assert api_client(make_key(bob)).get("/rentals").status_code == 200


def test_scopes_are_enforced_and_named(alice, alices_rental, make_key, api_client) -> None:
    read_only = api_client(make_key(alice, scopes=["read"]))
    refused = assert_envelope(read_only.post("/rentals", json={}), 403, "insufficient_scope")
    assert "'rent'" in refused["error"]["message"]
    refused = assert_envelope(
        read_only.post(f"/rentals/{alices_rental.public_id}/terminate"), 403, "insufficient_scope"
    )
    assert "'manage'" in refused["error"]["message"]

    rent_only = api_client(make_key(alice, scopes=["rent"]))
    refused = assert_envelope(rent_only.get("/rentals"), 403, "insufficient_scope")
    assert "'read'" in refused["error"]["message"]
    assert_envelope(rent_only.get(f"/rentals/{alices_rental.public_id}"), 403, "insufficient_scope")
    assert_envelope(rent_only.get("/fabrics"), 403, "insufficient_scope")


def test_bob_gets_404_for_every_url_of_alices_rental(alice, bob, alices_rental, make_key, api_client) -> None:
    client = api_client(make_key(bob))
    rid = alices_rental.public_id
    assert_envelope(client.get(f"/rentals/{rid}"), 404, "not_found")
    assert_envelope(client.post(f"/rentals/{rid}/terminate"), 404, "not_found")
    assert client.get("/rentals").json()["items"] == []
    # Alice's teammate sees it; so does alice.
    assert api_client(make_key(alice)).get(f"/rentals/{rid}").json()["id"] == str(rid)


def test_carol_sees_her_teammates_rental(carol, alices_rental, make_key, api_client) -> None:
    assert api_client(make_key(carol)).get(f"/rentals/{alices_rental.public_id}").status_code == 200


def test_support_reads_everything_and_gets_403_on_every_write(sam, alices_rental, make_key, api_client) -> None:
    client = api_client(make_key(sam))
    rid = alices_rental.public_id
    assert client.get(f"/rentals/{rid}").status_code == 200
    assert [item["id"] for item in client.get("/rentals").json()["items"]] == [str(rid)]
    assert_envelope(client.post(f"/rentals/{rid}/terminate"), 403, "read_only_role")
    assert_envelope(client.post("/rentals", json={"fabric_id": "x"}), 403, "read_only_role")
    assert_envelope(client.post(f"/rentals/{'0' * 8}-0000-0000-0000-{'0' * 12}/terminate"), 403, "read_only_role")


def test_operator_may_read_and_act_on_any_rental(olga, alices_rental, make_key, api_client) -> None:
    client = api_client(make_key(olga))
    assert client.get(f"/rentals/{alices_rental.public_id}").status_code == 200
    # Not rented yet: nothing to terminate, and the answer says so (not a 403/404).
    assert_envelope(client.post(f"/rentals/{alices_rental.public_id}/terminate"), 409, "not_terminable")


def test_a_member_may_not_set_customer_ref(alice, make_key, api_client) -> None:
    body = {"fabric_id": "f", "node_count": 2, "pod_name": "x", "ssh_public_keys": [SSH_KEY], "customer_ref": "evil"}
    refused = assert_envelope(api_client(make_key(alice)).post("/rentals", json=body), 403, "customer_ref_not_allowed")
    assert "operators" in refused["error"]["message"].lower()


def test_errors_use_the_envelope_for_unknown_urls_methods_and_bad_input(alice, make_key, api_client) -> None:
    client = api_client(make_key(alice))
    assert_envelope(client.get("/nothing/here"), 404, "not_found")
    assert_envelope(client.get("/rentals/not-a-uuid"), 404, "not_found")
    assert_envelope(client.delete("/rentals"), 405, "method_not_allowed")
    body = assert_envelope(client.get("/rentals", params={"limit": "0"}), 422, "validation_error")
    assert body["validation_errors"][0]["field"] == "limit"
    assert_envelope(client.get("/rentals", params={"status": "bogus"}), 422, "validation_error")
    assert_envelope(client.get("/rentals", params={"cursor": "!!"}), 422, "invalid_cursor")
    assert_envelope(client.get("/rentals", params={"customer_ref": "a b"}), 422)
    assert_envelope(client.post("/rentals", content=b"{not json"), 400, "invalid_json")
    assert_envelope(client.post("/rentals", json=[1, 2]), 400, "invalid_json")
    assert_envelope(client.post("/rentals", content=b"[" * 100_000), 400, "invalid_json")
    assert_envelope(client.post("/rentals", content=b"{}" + b" " * 300_000), 413, "payload_too_large")
    odd_cursor = base64.urlsafe_b64encode(b'["0001-01-01T00:00:00+14:00", 1]').decode()
    assert_envelope(client.get("/rentals", params={"cursor": odd_cursor}), 422, "invalid_cursor")
    far = "9999-12-31T23:59:59-01:00"
    assert_envelope(client.get("/rentals", params={"created_after": far}), 422)
    body = assert_envelope(client.post("/rentals", json={"pod_name": 5}), 422, "validation_error")
    fields = {item["field"] for item in body["validation_errors"]}
    assert {"pod_name", "fabric_id", "ssh_public_keys"} <= fields


def test_an_unexpected_error_is_a_500_envelope_and_a_read_answer_carries_its_request_id(
    alice, make_key, api_client, monkeypatch
) -> None:
    client = api_client(make_key(alice))
    listed = client.get("/rentals")
    assert listed.status_code == 200 and listed.headers["X-Request-Id"].startswith("req_")

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug")

    monkeypatch.setattr("api.rentals.rentals_page", broken)
    body = assert_envelope(client.get("/rentals"), 500, "internal_error")
    assert "a bug" not in str(body), "the client hears no internals, only the request_id to quote"


def test_the_schema_and_docs_are_served(api_client) -> None:
    client = api_client()
    schema = client.get("/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/rentals", "/api/v1/rentals/{rental_id}", "/api/v1/fabrics"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_a_key_is_shown_once_and_stored_hashed(alice, client_for) -> None:
    client = client_for(alice)
    page = client.post("/profile/api-keys/", {"name": "laptop", "scopes": ["read", "rent"], "expires_in_days": "30"})
    assert page.status_code == 200
    assert page["Cache-Control"] == "no-store"
    text = must_search(r"lcd_[0-9a-f]{8}_[A-Za-z0-9_-]+", page.content.decode()).group(0)
    key = ApiKey.objects.get(user=alice)
    prefix, secret = text.split("_", 2)[1:]
    assert key.prefix == prefix
    assert key.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiKey.objects.filter(pk=key.pk).values().get())
    assert key.scopes == ["read", "rent"] and key.expires_at is not None
    again = client.get("/profile/api-keys/").content.decode()
    assert secret not in again and f"lcd_{prefix}_" in again

    client.post(f"/profile/api-keys/{key.pk}/revoke/")
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None


def test_a_user_cannot_revoke_someone_elses_key(alice, bob, make_key, client_for) -> None:
    text = make_key(alice)
    key = ApiKey.objects.get(prefix=text.split("_")[1])
    client_for(bob).post(f"/profile/api-keys/{key.pk}/revoke/")
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None


def test_the_key_page_needs_a_login(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/profile/api-keys/").status_code == 302
