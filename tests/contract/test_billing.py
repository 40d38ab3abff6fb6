"""The simulator bills: running pods draw the account's balance down on the sim clock (simulator/billing.py)."""

from __future__ import annotations

import pytest

from .conftest import Api

pytestmark = pytest.mark.sim_only

# Real time passes between calls too (the sim clock is real time plus an offset): allow a few seconds of it.
SLACK_USD = 0.05


def balance(api: Api) -> float:
    r = api.get("/users/me")
    assert r.status_code == 200, r.text
    return r.json()["balance"]


def rent_running(api: Api) -> tuple[str, float]:
    """Rent the two cheapest whole nodes and let them start; return the cluster id and its price per hour."""
    r = api.rent(api.order(api.cheapest(2, fabric=2)))
    assert r.status_code == 200, r.text
    cluster_id = r.json()["cluster_id"]
    api.advance(2)  # past --start-seconds 1: RUNNING
    members = [p for p in api.pods() if p["cluster_id"] == cluster_id]
    assert {p["status"] for p in members} == {"RUNNING"}
    return cluster_id, sum(p["price"] for p in members)


def test_config_sets_a_balance_that_users_me_shows(api: Api) -> None:
    answer = api.config(balances={"acct-main": 12.5})
    assert answer["balances"]["acct-main"] == 12.5
    assert balance(api) == 12.5


def test_an_unknown_account_or_a_bad_amount_is_refused(api: Api) -> None:
    r = api.http.post("/_sim/config", json={"balances": {"acct-nobody": 1}})
    assert r.status_code == 422 and "unknown account" in r.json()["error"]["message"]
    r = api.http.post("/_sim/config", json={"balances": {"acct-main": "lots"}})
    assert r.status_code == 422


def test_a_running_cluster_draws_price_times_hours_from_the_balance(api: Api) -> None:
    api.config(balances={"acct-main": 1000})
    _cluster, price = rent_running(api)
    before = balance(api)
    api.advance(3600)
    after = balance(api)
    assert before - after == pytest.approx(price, abs=SLACK_USD)


def test_a_pod_that_is_still_starting_costs_nothing(api: Api) -> None:
    api.config(balances={"acct-main": 1000}, start_seconds=600)
    r = api.rent(api.order(api.cheapest(2, fabric=2)))
    assert r.status_code == 200
    api.advance(300)
    assert balance(api) == pytest.approx(1000, abs=0.0001)


def test_billing_stops_when_the_cluster_is_deleted(api: Api) -> None:
    api.config(balances={"acct-main": 1000})
    cluster_id, _price = rent_running(api)
    assert api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).status_code == 200
    after_delete = balance(api)
    api.advance(3600)
    assert balance(api) == pytest.approx(after_delete, abs=0.0001)


def test_when_the_balance_runs_dry_every_pod_of_the_account_is_removed(api: Api) -> None:
    api.config(balances={"acct-main": 1000})
    cluster_id, price = rent_running(api)
    api.config(balances={"acct-main": price / 2})  # half an hour left
    api.advance(3600)
    assert balance(api) <= 0
    assert {p["status"] for p in api.pods() if p["cluster_id"] == cluster_id} == {"DELETING"}
    api.advance(2)  # past --delete-seconds
    assert [p for p in api.pods() if p["cluster_id"] == cluster_id] == []
