"""Monthly budgets: refusal at 100 % with a message that says so, thresholds once each, enforcement off and on."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from billing.models import BudgetAlert
from billing.services import budget_set_by_customer, budget_set_by_operator, budgets_scan
from notifications.models import Event
from notifications.services import endpoint_create
from ops.selectors import audit_events
from rentals.models import Rental, RentalEvent
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus
from tests.billing.conftest import terminate
from tests.conftest import SSH_KEY


def order(price: str = "10.00") -> RentOrder:
    return RentOrder(
        fabric_id="fab-1",
        executor_ids=["x1", "x2"],
        pod_name="more",
        public_keys=[SSH_KEY],
        price_per_hour=Decimal(price),
    )


def budget(customer, usd: str, *, enforce: bool = False, grace_hours: int = 24) -> None:  # type: ignore[no-untyped-def]
    budget_set_by_operator(customer=customer, monthly_budget_usd=Decimal(usd), enforce=enforce, grace_hours=grace_hours)


def threshold_events(customer) -> list[dict]:  # type: ignore[no-untyped-def]
    events = Event.objects.filter(customer=customer, type="budget.threshold").order_by("created_at", "id")
    return [json.loads(event.body)["data"] for event in events]


@pytest.fixture
def hook(acme, alice):  # type: ignore[no-untyped-def]
    """Acme's webhook, subscribed to budget thresholds (so events are written)."""
    return endpoint_create(customer=acme, url="http://127.0.0.1:9/hook", events=["budget.threshold"], created_by=alice)


# --- At rent time --------------------------------------------------------------------------------------------


def test_a_customer_past_its_budget_is_refused_with_a_message_that_says_so(
    acme, alice, make_ready_rental, june_clock
) -> None:
    budget(acme, "100")
    make_ready_rental(acme, price="50.00")
    june_clock.advance(hours=2)  # $100 spent

    with pytest.raises(ValidationError) as refused:
        rental_submit(user=alice, customer=acme, order=order("1.00"), customer_ref="acme")

    message = refused.value.messages[0]
    assert "reached its monthly budget" in message and "$100.00 spent of $100.00" in message and "100 %" in message
    assert Rental.objects.count() == 1


def test_an_order_that_would_pass_the_budget_within_the_hour_is_refused(
    acme, alice, make_ready_rental, june_clock
) -> None:
    budget(acme, "100")
    make_ready_rental(acme, price="30.00")
    june_clock.advance(hours=2)  # $60 spent; next hour of everything: 30 + 20 = $50 > $40 left

    with pytest.raises(ValidationError, match="past its monthly budget within the hour"):
        rental_submit(user=alice, customer=acme, order=order("20.00"), customer_ref="acme")
    assert rental_submit(user=alice, customer=acme, order=order("5.00"), customer_ref="acme").pk


def test_without_a_budget_nothing_is_refused(acme, alice, make_ready_rental, june_clock) -> None:
    make_ready_rental(acme, price="500.00")
    june_clock.advance(hours=100)
    assert rental_submit(user=alice, customer=acme, order=order("500.00"), customer_ref="acme").pk


def test_the_customers_own_lower_budget_applies_and_may_not_exceed_the_operators(
    acme, alice, make_ready_rental, june_clock
) -> None:
    budget(acme, "100")
    budget_set_by_customer(customer=acme, customer_budget_usd=Decimal("20"))
    make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=2)
    with pytest.raises(ValidationError, match=r"\$20.00 spent of \$20.00"):
        rental_submit(user=alice, customer=acme, order=order("1.00"), customer_ref="acme")
    with pytest.raises(ValidationError, match="at most the operators' budget"):
        budget_set_by_customer(customer=acme, customer_budget_usd=Decimal("150"))


# --- Thresholds ----------------------------------------------------------------------------------------------


def test_each_threshold_is_raised_once_per_month(acme, make_ready_rental, june_clock, hook) -> None:
    budget(acme, "100")
    make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=7, minutes=54)  # 79 %
    assert budgets_scan() == 0
    june_clock.advance(minutes=36)  # 85 %
    assert budgets_scan() == 1
    assert budgets_scan() == 0  # again: nothing new
    june_clock.advance(hours=1, minutes=30)  # 100 %
    assert budgets_scan() == 2  # 90 and 100 (both crossed since the last scan)
    june_clock.advance(hours=3)
    assert budgets_scan() == 0

    events = sorted(threshold_events(acme), key=lambda e: e["threshold_pct"])
    assert [e["threshold_pct"] for e in events] == [80, 90, 100]
    assert events[0] == {
        "customer_ref": "acme",
        "month": "2030-06",
        "threshold_pct": 80,
        "spent_usd": "85.00",
        "budget_usd": "100.00",
    }
    assert events[2]["enforcement"] == {"enabled": False}


def test_a_new_month_raises_the_thresholds_again(acme, make_ready_rental, june_clock, hook) -> None:
    budget(acme, "10")
    rental = make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=1)
    assert budgets_scan() == 3
    terminate(rental)
    june_clock.advance(days=30)  # July: the June cluster's cost is June's
    make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=1)
    assert budgets_scan() == 3
    assert set(BudgetAlert.objects.values_list("month", flat=True)) == {"2030-06", "2030-07"}


# --- Enforcement ---------------------------------------------------------------------------------------------


def test_enforcement_is_off_by_default_clusters_run_on_past_the_budget(
    acme, make_ready_rental, june_clock, hook
) -> None:
    budget_set_by_customer(customer=acme, customer_budget_usd=Decimal("10"))
    rental = make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=1)
    budgets_scan()
    june_clock.advance(days=3)
    budgets_scan()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.READY


def test_enforcement_warns_then_waits_for_the_grace_then_terminates(acme, make_ready_rental, june_clock, hook) -> None:
    budget(acme, "10", enforce=True, grace_hours=6)
    rental = make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=1)

    budgets_scan()  # 100 %: the warning, with the enforcement's deadline
    [warning] = [e for e in threshold_events(acme) if e["threshold_pct"] == 100]
    assert warning["threshold_pct"] == 100
    assert warning["enforcement"]["enabled"] is True and warning["enforcement"]["grace_hours"] == 6
    steps = RentalEvent.objects.filter(rental=rental, kind=RentalEvent.Kind.STAFF_ACTION)
    assert [e.message for e in steps] == [
        "Budget enforcement warning: $10.00 of $10.00 spent in 2030-06; the clusters will be terminated after 6 h "
        "unless the budget is raised."
    ]

    june_clock.advance(hours=5, minutes=59)
    budgets_scan()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.READY  # still in the grace period

    june_clock.advance(minutes=2)
    budgets_scan()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.TERMINATING
    messages = [e.message for e in RentalEvent.objects.filter(rental=rental).order_by("at", "id")]
    assert any("grace period over" in m for m in messages)
    assert any(m.startswith("Terminate requested. Budget enforcement") for m in messages)
    audited = [e.message for e in audit_events() if e.rental_id == rental.pk]
    assert any("warning" in m for m in audited) and any("grace period over" in m for m in audited)


def test_enforcement_stands_down_when_the_budget_is_raised_in_the_grace(
    acme, make_ready_rental, june_clock, hook
) -> None:
    budget(acme, "10", enforce=True, grace_hours=1)
    rental = make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=1)
    budgets_scan()
    budget(acme, "1000", enforce=True, grace_hours=1)
    june_clock.advance(hours=2)
    budgets_scan()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.READY


def test_enforcement_switched_on_after_100_percent_warns_first(acme, make_ready_rental, june_clock, hook) -> None:
    budget(acme, "10")
    rental = make_ready_rental(acme, price="10.00")
    june_clock.advance(hours=1)
    budgets_scan()
    budget(acme, "10", enforce=True, grace_hours=2)
    budgets_scan()  # the warning now; the grace starts now
    enforcement = sorted(e["enforcement"]["enabled"] for e in threshold_events(acme) if "enforcement" in e)
    assert enforcement == [False, True]  # the 100 % alert without it, then the warning with it
    june_clock.advance(hours=1)
    budgets_scan()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.READY
    june_clock.advance(hours=1, seconds=1)
    budgets_scan()
    rental.refresh_from_db()
    assert rental.status == RentalStatus.TERMINATING
    assert BudgetAlert.objects.get(threshold_pct=100).terminated_at == june_clock.now
    assert timedelta(0) < june_clock.now - BudgetAlert.objects.get(threshold_pct=100).at
