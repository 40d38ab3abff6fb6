"""Cost so far: rented → terminated at the order's price, month to date, prorated across months, estimates."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from billing.usage import Month, month_to_date_usd, usage_report
from rentals.models import Rental
from tests.billing.conftest import terminate


def test_a_terminated_rental_costs_its_hours_times_its_price(acme, make_ready_rental, june_clock) -> None:
    rental = make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=2, minutes=30)
    terminate(rental)
    june_clock.advance(hours=5)  # time after the end costs nothing

    report = usage_report(rentals=Rental.objects.all(), month=Month(2030, 6))

    [line] = report.lines
    assert line.hours == Decimal("2.5000")
    assert line.cost_usd == Decimal("25.00")
    assert line.ended is not None and not line.estimate
    assert report.total_usd == Decimal("25.00")


def test_a_running_rental_costs_so_far_and_is_marked_as_an_estimate(acme, make_ready_rental, june_clock) -> None:
    make_ready_rental(acme, price="4.00")
    june_clock.advance(minutes=45)

    [line] = usage_report(rentals=Rental.objects.all(), month=Month(2030, 6)).lines

    assert line.cost_usd == Decimal("3.00")
    assert line.ended is None and line.estimate
    june_clock.advance(minutes=15)
    assert month_to_date_usd(customer=acme) == Decimal("4.00")


def test_a_rental_that_spans_two_months_is_split_between_them(acme, make_ready_rental, june_clock) -> None:
    june_clock.now = datetime(2030, 6, 30, 22, 0, tzinfo=UTC)
    rental = make_ready_rental(acme, price="3.00")
    june_clock.now = datetime(2030, 7, 1, 3, 0, tzinfo=UTC)
    terminate(rental)

    june = usage_report(rentals=Rental.objects.all(), month=Month(2030, 6))
    july = usage_report(rentals=Rental.objects.all(), month=Month(2030, 7))

    assert [line.hours for line in june.lines] == [Decimal("2.0000")]
    assert june.lines[0].ended == datetime(2030, 7, 1, tzinfo=UTC)
    assert [line.cost_usd for line in july.lines] == [Decimal("9.00")]
    assert july.lines[0].started == datetime(2030, 7, 1, tzinfo=UTC)
    assert month_to_date_usd(customer=acme) == Decimal("9.00")  # July to date


def test_a_month_before_any_rental_and_an_order_never_rented_cost_nothing(acme, make_ready_rental, june_clock) -> None:
    make_ready_rental(acme)
    june_clock.advance(hours=1)
    assert usage_report(rentals=Rental.objects.all(), month=Month(2030, 5)).lines == []
    Rental.objects.update(rented_at=None)  # e.g. refused: never rented
    assert usage_report(rentals=Rental.objects.all(), month=Month(2030, 6)).total_usd == Decimal(0)


def test_the_total_is_the_sum_of_the_rounded_lines(acme, make_ready_rental, june_clock) -> None:
    for price in ("1.3333", "2.6667", "0.0049"):
        make_ready_rental(acme, price=price)
        june_clock.advance(minutes=7, seconds=13)
    report = usage_report(rentals=Rental.objects.all(), month=Month(2030, 6))
    assert report.total_usd == sum(line.cost_usd for line in report.lines)
    for line in report.lines:
        assert abs(line.hours * line.price_per_hour - line.cost_usd) < Decimal("0.01")


def test_a_month_is_given_as_yyyy_mm() -> None:
    assert Month.parse("2030-02").end == datetime(2030, 3, 1, tzinfo=UTC)
    assert Month.parse("2030-12").end == datetime(2031, 1, 1, tzinfo=UTC)
    for bad in ("2030-13", "2030-1", "june", ""):
        try:
            Month.parse(bad)
        except ValueError as exc:
            assert "YYYY-MM" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")
