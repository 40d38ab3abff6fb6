"""The usage page, its CSV and `GET /api/v1/usage` agree to the cent, and each shows only what the reader may see."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal

import pytest

from api.keys import api_key_create
from tests.billing.conftest import terminate


@pytest.fixture
def usage_world(acme, globex, alice, bob, make_ready_rental, june_clock):  # type: ignore[no-untyped-def]
    """Acme: one ended and one running cluster at odd prices and times; Globex: one of its own."""
    first = make_ready_rental(acme, price="3.3333", pod_name="acme-train")
    june_clock.advance(hours=1, minutes=7, seconds=13)
    second = make_ready_rental(acme, price="12.3456", pod_name="acme-eval")
    june_clock.advance(minutes=41, seconds=5)
    terminate(first)
    make_ready_rental(globex, price="7.7700", pod_name="globex-job")
    june_clock.advance(hours=2, seconds=59)
    return {"acme": [first, second]}


def page_lines(client) -> tuple[dict[str, Decimal], Decimal]:  # type: ignore[no-untyped-def]
    html = client.get("/usage/?month=2030-06").content.decode()
    costs = {
        rental: Decimal(cost)
        for rental, cost in re.findall(r'data-rental="([^"]+)".*?data-testid="line-cost">([\d.]+)', html, re.S)
    }
    total = Decimal(re.search(r'data-testid="total">([\d.]+)<', html).group(1))  # type: ignore[union-attr]
    return costs, total


def csv_lines(client) -> tuple[dict[str, Decimal], Decimal]:  # type: ignore[no-untyped-def]
    response = client.get("/usage.csv?month=2030-06")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    total = Decimal(rows[-1]["cost_usd"])
    assert rows[-1]["id"] == "total"
    return {row["id"]: Decimal(row["cost_usd"]) for row in rows[:-1]}, total


def api_lines(client, user) -> tuple[dict[str, Decimal], Decimal, list[dict]]:  # type: ignore[no-untyped-def]
    _key, raw = api_key_create(user=user, name="usage", scopes=["read"])
    response = client.get("/api/v1/usage?month=2030-06", headers={"X-API-Key": raw})
    assert response.status_code == 200, response.content
    body = response.json()
    return {line["id"]: Decimal(line["cost_usd"]) for line in body["lines"]}, Decimal(body["total_usd"]), body["lines"]


def test_page_csv_and_api_agree_to_the_cent_with_hours_times_price(client_for, alice, usage_world) -> None:
    client = client_for(alice)
    page, page_total = page_lines(client)
    from_csv, csv_total = csv_lines(client)
    from_api, api_total, lines = api_lines(client, alice)

    assert page == from_csv == from_api
    assert page_total == csv_total == api_total == sum(page.values())
    assert set(page) == {str(r.public_id) for r in usage_world["acme"]}
    for line in lines:
        assert set(line) >= {
            "id",
            "pod_name",
            "customer_ref",
            "started",
            "ended",
            "hours",
            "price_per_hour",
            "cost_usd",
        }
        hours_times_price = Decimal(line["hours"]) * Decimal(line["price_per_hour"])
        assert abs(hours_times_price - Decimal(line["cost_usd"])) <= Decimal("0.01")
    running = [line for line in lines if line["ended"] is None]
    assert [line["pod_name"] for line in running] == ["acme-eval"] and running[0]["estimate"] is True


def test_a_member_sees_only_their_customers_usage_and_staff_see_all(client_for, bob, sam, usage_world) -> None:
    client = client_for(bob)
    page, _ = page_lines(client)
    from_csv, _ = csv_lines(client)
    from_api, _, lines = api_lines(client, bob)
    assert [line["pod_name"] for line in lines] == ["globex-job"]
    assert set(page) == set(from_csv) == set(from_api) == {lines[0]["id"]}
    assert "acme" not in client.get("/usage/?month=2030-06").content.decode().lower()

    staff = client_for(sam)
    assert len(page_lines(staff)[0]) == 3
    assert len(api_lines(staff, sam)[0]) == 3


def test_another_customers_usage_is_404_for_a_member(client_for, bob, acme, usage_world) -> None:
    assert client_for(bob).get(f"/usage/?customer={acme.pk}").status_code == 404


def test_a_bad_month_is_refused_with_the_expected_form(client_for, alice, usage_world) -> None:
    _key, raw = api_key_create(user=alice, name="usage", scopes=["read"])
    response = client_for(alice).get("/api/v1/usage?month=June", headers={"X-API-Key": raw})
    assert response.status_code == 422
    assert "YYYY-MM" in response.json()["error"]["message"]


def test_the_usage_page_shows_the_month_to_date_against_the_budget(client_for, alice, acme, usage_world) -> None:
    from billing.services import budget_set_by_operator

    budget_set_by_operator(customer=acme, monthly_budget_usd=Decimal("100"), enforce=False, grace_hours=24)
    html = client_for(alice).get("/usage/").content.decode()
    _page, total = page_lines(client_for(alice))
    assert f"${total}" in html and "of a monthly budget of <strong>$100.00" in html


def test_an_as_of_with_an_extreme_zone_offset_is_read_in_utc_not_a_server_error(client_for, alice, usage_world) -> None:
    """Python accepts offsets up to ±23:59, PostgreSQL only up to ±15:59 (the schemathesis run found a 500)."""
    _key, raw = api_key_create(user=alice, name="usage", scopes=["read"])
    response = client_for(alice).get(
        "/api/v1/usage", {"month": "2030-06", "as_of": "2030-05-31T08:00:00-18:36"}, headers={"X-API-Key": raw}
    )
    assert response.status_code == 200, response.content
    assert response.json()["as_of"].startswith("2030-06-01T02:36:00")


def without_csrf(content: bytes) -> str:
    """The answer without its CSRF tokens, which differ on every page."""
    return re.sub(r'"[A-Za-z0-9]{64}"', '"token"', content.decode())


@pytest.mark.parametrize("path", ["/usage/", "/usage.csv"])
def test_the_usage_page_and_csv_read_an_extreme_zone_offset_in_utc(client_for, alice, usage_world, path) -> None:  # type: ignore[no-untyped-def]
    """The page's `as_of` had the API's defect: PostgreSQL refused the offset and the page answered 500."""
    client = client_for(alice)
    extreme = client.get(path, {"month": "2030-06", "as_of": "2030-05-31T08:00:00-18:36"})
    in_utc = client.get(path, {"month": "2030-06", "as_of": "2030-06-01T02:36:00+00:00"})
    assert extreme.status_code == 200
    assert without_csrf(extreme.content) == without_csrf(in_utc.content)


def test_an_as_of_before_the_year_1_in_utc_is_refused_and_now_is_shown(client_for, alice, usage_world) -> None:  # type: ignore[no-untyped-def]
    client = client_for(alice)
    ancient = {"month": "2030-06", "as_of": "0001-01-01T00:30:00+01:00"}
    page = client.get("/usage/", ancient)
    assert page.status_code == 200
    assert "Give a moment after the year 1 in UTC." in page.content.decode()
    assert client.get("/usage.csv", ancient).content == client.get("/usage.csv", {"month": "2030-06"}).content


def test_the_api_refuses_an_as_of_before_the_year_1_in_utc(client_for, alice, usage_world) -> None:  # type: ignore[no-untyped-def]
    _key, raw = api_key_create(user=alice, name="usage", scopes=["read"])
    response = client_for(alice).get(
        "/api/v1/usage", {"month": "2030-06", "as_of": "0001-01-01T00:30:00+01:00"}, headers={"X-API-Key": raw}
    )
    assert response.status_code == 422, response.content
    assert "as_of" in response.json()["error"]["message"]


@pytest.mark.parametrize("month", ["0000-06", "9999-12"])
def test_a_month_a_date_cannot_hold_is_refused_with_the_expected_form(client_for, alice, usage_world, month) -> None:  # type: ignore[no-untyped-def]
    """Its first day (year 0) or the next month's (year 10000) is not a date: the page answered 500."""
    client = client_for(alice)
    page = client.get("/usage/", {"month": month})
    assert page.status_code == 200
    assert "Give a month from 0001-01 to 9999-11." in page.content.decode()
    assert client.get("/usage.csv", {"month": month}).status_code == 200
    _key, raw = api_key_create(user=alice, name="usage", scopes=["read"])
    response = client.get("/api/v1/usage", {"month": month}, headers={"X-API-Key": raw})
    assert response.status_code == 422
    assert "0001-01 to 9999-11" in response.json()["error"]["message"]
