"""Each state set of `rentals.states`, through the behaviour that reads it, for every state.

HOLDS_CLUSTER_STATES: a customer can remove the cluster (and a budget stops it). FINAL_STATES: nothing more
will happen, so it no longer counts in the customer's hourly spend and its page stops polling. NOT_ACTIVE_STATES:
the final ones and `scheduled`, which bills nothing (and counts in no quota) until its time. IN_FLIGHT_STATES:
the page polls fast because a worker or the poller moves the rental on by itself. CUSTOMER_EXPLANATIONS: the
words each state's page says.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone
from django.utils.html import escape

from rentals.models import Rental
from rentals.selectors import customer_hourly_spend
from rentals.services import rental_terminate
from rentals.states import CUSTOMER_EXPLANATIONS, RentalStatus
from rentals.web.progress import POLL_FAST_SECONDS, POLL_SLOW_SECONDS

pytestmark = pytest.mark.django_db

S = RentalStatus
ALL = list(S)
HOLDING = {S.RENTED, S.VERIFYING, S.CHECK_FAILED, S.READY, S.DEGRADED}
FINAL = {S.REFUSED, S.FAILED, S.NOT_RENTED, S.CANCELLED, S.TERMINATED}
NOT_ACTIVE = FINAL | {S.SCHEDULED}
IN_FLIGHT = {S.QUEUED, S.SENDING, S.RETRYING, S.RENTED, S.VERIFYING, S.TERMINATING}


@pytest.mark.parametrize("status", ALL)
def test_the_customer_can_remove_the_cluster_exactly_while_one_may_be_held(make_rental, alice, status: str) -> None:
    rental = make_rental(status=status, cluster_id="cl-1")

    removing = rental_terminate(rental=rental, actor=alice, reason="done")

    rental.refresh_from_db()
    if status in HOLDING:  # a degraded cluster still runs (and bills) on its healthy nodes
        assert removing and rental.status == S.TERMINATING
    else:
        assert not removing and rental.status == status


@pytest.mark.parametrize("status", ALL)
def test_only_a_final_or_scheduled_rental_stays_out_of_the_customers_hourly_spend(
    make_rental, acme, status: str
) -> None:
    make_rental(status=status, price_per_hour=Decimal("10.00"))

    spend = customer_hourly_spend(customer=acme)

    assert spend == (Decimal(0) if status in NOT_ACTIVE else Decimal("10.00"))


@pytest.mark.parametrize("status", sorted(set(ALL) - FINAL))
def test_the_page_polls_fast_only_while_the_rental_moves_on_by_itself(make_rental, alice, client_for, status) -> None:
    rental: Rental = make_rental(status=status)

    page = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()

    delay = POLL_FAST_SECONDS if status in IN_FLIGHT else POLL_SLOW_SECONDS
    assert f'hx-trigger="load delay:{delay}s"' in page


@pytest.mark.parametrize("status", ALL)
def test_a_final_rentals_page_stops_polling(make_rental, alice, client_for, status: str) -> None:
    rental: Rental = make_rental(status=status)

    page = client_for(alice).get(f"/rentals/{rental.public_id}/")

    assert page.status_code == 200
    assert (b"hx-trigger" in page.content) is (status not in FINAL), "a final rental's page stops polling"


@pytest.mark.parametrize("status", ALL)
def test_every_state_tells_the_customer_in_plain_words_what_it_means(make_rental, alice, client_for, status) -> None:
    # A refusal the state's sentence speaks of is Lium's, after a send (one before any send says so itself).
    sent = {"attempt_count": 1} if status == "refused" else {}
    rental: Rental = make_rental(status=status, rented_at=timezone.now(), **sent)

    page = client_for(alice).get(f"/rentals/{rental.public_id}/")

    said = CUSTOMER_EXPLANATIONS[status]
    assert said and escape(said) in page.content.decode()
