"""Rent calls in flight: the per-credential and global caps, the waiting mark, and who gets a freed slot."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import UpstreamCredential
from rentals import capacity, engine, tasks
from rentals.enqueue import RENTAL_SEND
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.conftest import SIM_KEY
from tests.rentals.fakes import Enqueued, FakeUpstream, rented


@pytest.fixture
def caps(settings):  # type: ignore[no-untyped-def]
    settings.RENT_INFLIGHT_PER_CREDENTIAL = 2
    settings.RENT_INFLIGHT_GLOBAL = 10
    return settings


def nodes(name: str) -> list[str]:
    return [f"{name}-x", f"{name}-y"]


def in_flight(rental: Rental) -> Rental:
    """Put the rental in `sending` under a lease that is still valid (a call under way elsewhere)."""
    Rental.objects.filter(pk=rental.pk).update(
        status=RentalStatus.SENDING, lease_until=timezone.now() + timedelta(seconds=60), attempt_count=1
    )
    rental.refresh_from_db()
    return rental


def finish(rental: Rental) -> None:
    Rental.objects.filter(pk=rental.pk).update(status=RentalStatus.RENTED, lease_until=None, lease_token=None)


def sent(enqueued: Enqueued) -> list[int]:
    return [args[0] for args, _ in enqueued.of(RENTAL_SEND)]  # type: ignore[misc]


def test_a_claim_past_the_credential_cap_leaves_the_rental_queued_and_marked_waiting(
    make_rental, caps, fake_upstream: FakeUpstream
) -> None:
    first, second, third = (make_rental(pod_name=name, executors=nodes(name)) for name in ("a1", "a2", "a3"))
    in_flight(first)
    in_flight(second)

    assert engine.rental_claim(rental_id=third.pk).claim is None

    third.refresh_from_db()
    assert third.status == RentalStatus.QUEUED and third.attempt_count == 0
    assert third.next_attempt_at is not None  # waiting for a slot: only a dispatch sends it now
    assert fake_upstream.rent_requests == []


def test_when_a_slot_frees_the_dispatcher_sends_the_waiting_rental_and_only_once(
    make_rental, caps, enqueued: Enqueued
) -> None:
    first, second, third = (make_rental(pod_name=name, executors=nodes(name)) for name in ("a1", "a2", "a3"))
    in_flight(first)
    in_flight(second)
    assert engine.rental_claim(rental_id=third.pk).claim is None
    enqueued.calls.clear()

    assert capacity.dispatch() == []  # no slot yet
    finish(first)
    assert capacity.dispatch() == [third.pk]
    assert capacity.dispatch() == []  # taken: a second dispatcher does not send it again
    assert sent(enqueued) == [third.pk]
    claim = engine.rental_claim(rental_id=third.pk).claim
    assert claim is not None and claim.rental.status == RentalStatus.SENDING


def test_the_freed_slot_goes_to_the_customer_with_fewest_calls_in_flight_not_the_oldest_rental(
    make_rental, caps, enqueued: Enqueued, globex
) -> None:
    burst = [make_rental(pod_name=f"a{i}", executors=nodes(f"a{i}")) for i in range(6)]
    in_flight(burst[0])
    in_flight(burst[1])
    for rental in burst[2:]:
        assert engine.rental_claim(rental_id=rental.pk).claim is None
    other = make_rental(pod_name="b1", executors=nodes("b1"))
    Rental.objects.filter(pk=other.pk).update(customer=globex)
    assert engine.rental_claim(rental_id=other.pk).claim is None  # the cap binds for Globex too

    finish(burst[0])
    # Acme's oldest waiting rental is older, but Acme has a call in flight and Globex none.
    assert engine.rental_claim(rental_id=burst[2].pk).claim is None
    assert capacity.dispatch() == [other.pk]
    in_flight(other)
    finish(burst[1])
    assert capacity.dispatch() == [burst[2].pk]  # then Acme's, oldest first


def test_a_claim_that_jumps_the_fair_order_is_refused_even_with_a_slot_free(make_rental, caps, globex) -> None:
    first, second = make_rental(pod_name="a1", executors=nodes("a1")), make_rental(pod_name="a2", executors=nodes("a2"))
    waiting = make_rental(pod_name="a3", executors=nodes("a3"))
    other = make_rental(pod_name="b1", executors=nodes("b1"))
    Rental.objects.filter(pk=other.pk).update(customer=globex)
    in_flight(first)
    in_flight(second)
    assert engine.rental_claim(rental_id=waiting.pk).claim is None
    finish(first)

    # One slot, and Globex (no call in flight) waits: Acme's late message must not take it.
    assert engine.rental_claim(rental_id=waiting.pk).claim is None
    assert engine.rental_claim(rental_id=other.pk).claim is not None


def test_the_global_cap_holds_across_credentials(make_rental, settings, acme) -> None:
    settings.RENT_INFLIGHT_PER_CREDENTIAL = 10
    settings.RENT_INFLIGHT_GLOBAL = 2
    second_key = UpstreamCredential(name="second", base_url="http://lium.invalid/api")
    second_key.set_secret(SIM_KEY)
    second_key.save()
    first, second = make_rental(pod_name="a1", executors=nodes("a1")), make_rental(pod_name="a2", executors=nodes("a2"))
    in_flight(first)
    in_flight(second)
    elsewhere = make_rental(pod_name="c1", executors=nodes("c1"))
    Rental.objects.filter(pk=elsewhere.pk).update(credential=second_key)

    assert engine.rental_claim(rental_id=elsewhere.pk).claim is None
    finish(first)
    assert engine.rental_claim(rental_id=elsewhere.pk).claim is not None


def test_an_expired_lease_frees_its_slot(make_rental, caps) -> None:
    first, second, third = (make_rental(pod_name=name, executors=nodes(name)) for name in ("a1", "a2", "a3"))
    in_flight(first)
    in_flight(second)
    Rental.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))

    assert engine.rental_claim(rental_id=third.pk).claim is not None


def test_a_finished_attempt_dispatches_the_next_waiting_rental(
    make_rental, caps, enqueued: Enqueued, fake_upstream: FakeUpstream
) -> None:
    first, second, third = (make_rental(pod_name=name, executors=nodes(name)) for name in ("a1", "a2", "a3"))
    in_flight(second)
    fake_upstream.script = [rented()]
    claim = engine.rental_claim(rental_id=first.pk).claim
    assert claim is not None
    assert engine.rental_claim(rental_id=third.pk).claim is None  # both slots taken
    Rental.objects.filter(pk=first.pk).update(
        status=RentalStatus.QUEUED, lease_token=None, lease_until=None, attempt_count=0
    )
    enqueued.calls.clear()

    assert engine.rental_attempt(rental_id=first.pk) == RentalStatus.RENTED

    assert sent(enqueued) == [third.pk]


def test_the_sweeper_dispatches_waiting_rentals_and_does_not_resend_them_blindly(
    make_rental, caps, enqueued: Enqueued, engine_settings
) -> None:
    first, second, third = (make_rental(pod_name=name, executors=nodes(name)) for name in ("a1", "a2", "a3"))
    in_flight(first)
    in_flight(second)
    assert engine.rental_claim(rental_id=third.pk).claim is None
    old = timezone.now() - timedelta(seconds=engine_settings.RENT_QUEUED_STUCK_SECONDS + 5)
    Rental.objects.filter(pk=third.pk).update(updated_at=old)
    enqueued.calls.clear()

    assert tasks.rentals_sweep()["dispatched"] == 0
    assert sent(enqueued) == []  # the cap still binds: no copy of its message is sent
    finish(first)
    assert tasks.rentals_sweep()["dispatched"] == 1
    assert sent(enqueued) == [third.pk]


def test_customers_are_interleaved_when_several_slots_free_at_once(make_rental, settings, globex) -> None:
    settings.RENT_INFLIGHT_PER_CREDENTIAL = 4
    acme_rentals = [make_rental(pod_name=f"a{i}", executors=nodes(f"a{i}")) for i in range(4)]
    globex_rentals = [make_rental(pod_name=f"b{i}", executors=nodes(f"b{i}")) for i in range(4)]
    Rental.objects.filter(pk__in=[r.pk for r in globex_rentals]).update(customer=globex)
    for rental in acme_rentals[:2] + globex_rentals[:2]:
        in_flight(rental)
    for rental in acme_rentals[2:] + globex_rentals[2:]:
        assert engine.rental_claim(rental_id=rental.pk).claim is None
    for rental in acme_rentals[:2] + globex_rentals[:1]:
        finish(rental)

    order = capacity.fair_order(acme_rentals[0].credential_id, timezone.now(), limit=3)

    # Acme has no call in flight, Globex one: Acme's oldest; then both have one, and Acme's next is older
    # than Globex's; then Globex (one in flight against Acme's two).
    assert [r.pk for r in order] == [acme_rentals[2].pk, acme_rentals[3].pk, globex_rentals[2].pk]


def test_the_back_of_one_customers_backlog_is_sent_while_slots_are_free(make_rental, caps) -> None:
    # Five queued, two slots free: the youngest's message may come first (older ones lost theirs to a broker
    # restart, say); a free slot is not kept for rentals of the same customer that may never claim it.
    backlog = [make_rental(pod_name=f"a{i}", executors=nodes(f"a{i}")) for i in range(5)]

    assert engine.rental_claim(rental_id=backlog[-1].pk).claim is not None
