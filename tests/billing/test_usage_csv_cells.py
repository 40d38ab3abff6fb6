"""The usage CSV a customer opens in a spreadsheet never carries a cell the spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io

import pytest

from accounts.models import Customer


@pytest.fixture
def formula_customer(acme, alice):  # type: ignore[no-untyped-def]
    """Acme renamed by someone who hopes a spreadsheet runs it, with a ref that starts with a minus."""
    Customer.objects.filter(pk=acme.pk).update(name='=HYPERLINK("http://evil.invalid","Click me")', customer_ref="-2")
    acme.refresh_from_db()
    return acme


def test_the_usage_csv_neutralises_names_and_refs_a_spreadsheet_would_run(
    client_for, alice, formula_customer, make_ready_rental, june_clock
) -> None:
    make_ready_rental(formula_customer, price="2.00", pod_name="train")
    june_clock.advance(hours=1)
    response = client_for(alice).get("/usage.csv?month=2030-06")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    line = rows[0]
    assert line["customer"] == '\'=HYPERLINK("http://evil.invalid","Click me")'
    assert line["customer_ref"] == "'-2"
    assert line["pod_name"] == "train", "a harmless cell is written as it is"
    assert rows[-1]["cost_usd"] == "2.00", "numbers are never quoted"
