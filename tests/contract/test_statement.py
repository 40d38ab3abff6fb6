"""`GET /billing/statement`: the simulator's ledger per pod and UTC day, and its skew (`POST /_sim/billing`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from .conftest import Api

pytestmark = pytest.mark.sim_only

# Real time passes between calls too (the sim clock is real time plus an offset): a few seconds of it.
SLACK_USD = 0.05


def to_before_midnight(api: Api, seconds: float) -> datetime:
    """Move the sim clock to `seconds` before the first UTC midnight at least that far ahead; return that midnight.

    (The next midnight may be nearer than `seconds`, in a run late in the UTC day: the clock only moves forward.)"""
    now = api.sim("GET", "clock")["epoch"]
    midnight = (datetime.fromtimestamp(now, UTC) + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    if midnight.timestamp() - now < seconds:
        midnight += timedelta(days=1)
    api.advance(midnight.timestamp() - now - seconds)
    return midnight


def rent_over_midnight(api: Api) -> tuple[str, float, datetime]:
    """Rent two nodes half an hour before midnight, let them run an hour past it; return cluster, $/h, midnight."""
    midnight = to_before_midnight(api, 1800)
    r = api.rent(api.order(api.cheapest(2, fabric=2)))
    assert r.status_code == 200, r.text
    cluster_id = r.json()["cluster_id"]
    api.advance(1800 + 3600)
    members = [p for p in api.pods() if p["cluster_id"] == cluster_id]
    return cluster_id, sum(p["price"] for p in members), midnight


def statement(api: Api, start: str, end: str) -> dict:
    r = api.get("/billing/statement", params={"start_day": start, "end_day": end})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_run_late_in_the_utc_day_rents_over_the_midnight_after(api: Api) -> None:
    # 15 minutes before a midnight, half an hour before it is the past: the clock moves to the next day's instead.
    first = to_before_midnight(api, 900)
    cluster_id, _, midnight = rent_over_midnight(api)
    assert midnight == first + timedelta(days=1) and cluster_id


def test_the_statement_splits_each_pods_charges_at_utc_midnight(api: Api) -> None:
    cluster_id, price, midnight = rent_over_midnight(api)
    before, after = (midnight - timedelta(days=1)).date().isoformat(), midnight.date().isoformat()
    answer = statement(api, before, after)
    assert (answer["start_day"], answer["end_day"]) == (before, after)
    pod_ids = {p["id"] for p in api.pods() if p["cluster_id"] == cluster_id}
    rows = [row for row in answer["pods"] if row["pod_id"] in pod_ids]
    assert len(rows) == 2
    for row in rows:
        assert [day["day"] for day in row["days"]] == [before, after]
        first, second = (day["amount"] for day in row["days"])
        # Started 1 s after the rent (--start-seconds 1): half an hour before midnight, an hour after.
        assert first + second == pytest.approx(row["total"], abs=1e-6)
        assert second == pytest.approx(2 * first, abs=SLACK_USD)
        assert row["removed_at"] is None and row["api_key_id"]
    assert sum(row["total"] for row in rows) == pytest.approx(price * 1.5, abs=SLACK_USD)
    assert answer["total"] == pytest.approx(sum(row["total"] for row in answer["pods"]), abs=1e-5)


def test_a_day_range_holds_only_that_days_ledger_and_removed_pods_stay(api: Api) -> None:
    cluster_id, _price, midnight = rent_over_midnight(api)
    assert api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).status_code == 200
    api.advance(3600)
    assert [p for p in api.pods() if p["cluster_id"] == cluster_id] == []
    day = midnight.date().isoformat()
    rows = statement(api, day, day)["pods"]
    assert len(rows) == 2
    assert all([d["day"] for d in row["days"]] == [day] and row["removed_at"] for row in rows)


def test_a_skew_adds_a_ledger_row_to_every_pod_of_that_day(api: Api) -> None:
    _cluster, _price, midnight = rent_over_midnight(api)
    day, before = midnight.date().isoformat(), (midnight - timedelta(days=1)).date().isoformat()
    plain = {row["pod_id"]: row for row in statement(api, before, day)["pods"]}
    assert api.sim("POST", "billing", {"statement_skew_usd": 1.5, "day": day}) == {"statement_skews": {day: 1.5}}
    skewed = statement(api, before, day)["pods"]
    for row in skewed:
        extra = [d for d in row["days"] if d["day"] == day][1:]
        assert [d["amount"] for d in extra] == [1.5]
        assert row["total"] == pytest.approx(plain[row["pod_id"]]["total"] + 1.5, abs=SLACK_USD)
    before_rows = [[d for d in row["days"] if d["day"] == before] for row in skewed]
    assert all(len(rows) == 1 for rows in before_rows)


def test_bad_days_and_skews_are_refused(api: Api) -> None:
    r = api.get("/billing/statement", params={"start_day": "2026-13-01"})
    assert r.status_code == 422 and "start_day" in r.json()["error"]["message"]
    r = api.get("/billing/statement", params={"start_day": "2026-12-02", "end_day": "2026-12-01"})
    assert r.status_code == 422
    for body in ({"statement_skew_usd": "lots", "day": "2026-12-01"}, {"statement_skew_usd": 1}, {"skew": 1}):
        r = api.http.post("/_sim/billing", json=body)
        assert r.status_code == 422, body


def test_the_statement_needs_a_key(api: Api) -> None:
    assert api.http.get("/billing/statement").status_code == 401
