"""A model-based test of the rent engine: random histories against a Lium that misbehaves, checked every step.

What is modelled. Up to four rentals of two customers (Acme and Globex) that share one credential, as a
reseller's customers share one Lium account: submitted as the history goes, with pod names and nodes drawn
from small pools (so one customer's order often asks for the pod name and nodes another's asked for, and
Lium rents a node to one order at a time), on a backend that does or does not promise idempotency
(`GET /version` lists `rent_idempotency`, chosen once per history). The upstream is
`ScriptedLium` behind `httpx.MockTransport`: each step chooses its answers (a confirmation with or without
ids, an HTML 200, over-long ids, a dropped connection or a trickle past the deadline, a connection never
made, 409 in progress or outcome unknown, 5xx, 429 with or without Retry-After, a fresh or a replayed
refusal; for pods a truthful, empty or unreadable listing; for DELETE acceptance, 404, an outage, an
unreadable 200, 409 or 403), and where an answer does not show whether the server rented, the step says,
so the ledger always knows how many clusters really exist for each key. Celery is `Broker`: messages wait
for their countdown on a hand-moved clock and run when a step delivers them, or are lost all at once.
Workers also claim and then die mid-call (the clock then passes the lease), or call and record their
answer steps later (after another worker may have taken the lease over). The sweeper, the pod poller and
the operator (retry now, reconcile, confirm what Lium holds, terminate, cancel) act at random in between.

Why. Each of these was a way to rent twice or to show a state the answers did not prove (issue 14); unit
tests cover each path alone, this covers their interleavings.

Invariants, after every step:
1. No second order to a backend without the promise: once a rent request for a key may have run
   upstream (anything but a connection never made or a 429), the server receives no further request
   with that key.
2. Every state is proven by the ledger: `rented`/`ready`/`degraded`/`terminating` only if a cluster was
   created for the key (and a stored cluster id or pod id is one of that key's); `refused`/`failed`/
   `not_rented`/`cancelled` only if none was (`cancelled`: not a single request was sent);
   `terminated` only once Lium accepted a DELETE of its cluster or answered 404 for it.
3. At most one live retry chain per rental and per delete. The code chains by claims: a `rental_send`
   message sends only if it can claim the rental (`engine._claimable`: retrying and `next_attempt_at`
   passed), a `rental_delete_cluster` message only if it can claim the DELETE (terminating and
   `next_delete_at` passed or unset), and only the claimer enqueues the next message. So a pending message
   is live when its countdown has not yet elapsed and it is due at or after the row's next turn
   (`next_attempt_at` of a retrying rental, `next_delete_at` of a terminating one); a message due before
   that turn will find nothing to claim. A `rental_send` that names its turn (attempt number: the engine's
   follow-up, an operator's Retry now) is live only while that turn is the next attempt; once any message
   took it, it does nothing. Sweeps, duplicate deliveries and lost messages must never leave
   two live ones. And what Lium sees keeps to the schedule, however the messages run: two rent requests
   with one key, or two DELETEs of one cluster, are never closer than half the backoff's base (its
   shortest jittered wait), unless an operator just asked to send at once (Retry now, a new Terminate).
4. The status is a `RentalStatus`, every state change on the timeline is allowed by
   `rentals.states.can_transition`, the timeline's changes follow on from one another, and the row is in
   the state its timeline ends in.
5. Evidence is exclusive (issue 24): no cluster and no pod is held by two rentals, and no rental, whatever
   its state, holds a cluster or a member pod that Lium created under another rental's idempotency key (or
   that no order of ours created).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.test import TestCase
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ops import services as ops
from rentals import engine, tasks, upstream
from rentals.engine import Claim
from rentals.fabric_check.keys import check_key_generate
from rentals.fabric_check.runner import FabricCheckResult
from rentals.models import ClusterMember, FabricCheck, Rental, RentalEvent
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.states import RentalStatus, can_transition
from rentals.tracking import members
from rentals.upstream import RentResult
from rentals.verification.choices import fabric_check_keep
from rentals.verification.records import CheckPlan
from tests.conftest import SSH_KEY
from tests.rentals.engine_model_world import (
    DELETE_KINDS,
    DELETE_TRUTHFUL,
    LISTING_KINDS,
    LISTING_TRUTHFUL,
    RENT_KINDS,
    Broker,
    RentAnswer,
    ScriptedLium,
)
from tests.rentals.fakes import Clock, Enqueued, FakeUpstream, error, send_args

pytestmark = pytest.mark.django_db

START = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LEASE_SECONDS = 60
MAX_RENTALS = 4
TASKS: dict[str, Callable[..., object]] = {
    "rental_send": tasks.rental_send,
    "rental_delete_cluster": tasks.rental_delete_cluster,
    "rental_reconcile_look": tasks.rental_reconcile_look,
    "credential_pods_sync": tasks.credential_pods_sync,
    "rental_removal_push": tasks.rental_removal_push,
    "member_events_fetch": tasks.member_events_fetch,
    "rental_fabric_check": tasks.rental_fabric_check,
}

rent_answers = st.builds(
    RentAnswer,
    kind=st.sampled_from(RENT_KINDS),
    rented=st.booleans(),
    status=st.sampled_from([400, 401, 402, 403]),
    retry_after=st.sampled_from([None, 5, 120, 900]),
)
# Lium removes the cluster as often as it fails to: a history should get to `terminated` now and then.
delete_answers = st.sampled_from([DELETE_TRUTHFUL] * (len(DELETE_KINDS) - 1) + DELETE_KINDS)
listings = st.sampled_from(LISTING_KINDS)
# Two customers on one account, drawing from the same few pod names and nodes (the pairs overlap).
CUSTOMERS = ["acme", "globex"]
POD_NAMES = ["train-1", "train-2"]
NODE_PAIRS = [("exec-a", "exec-b"), ("exec-c", "exec-d"), ("exec-b", "exec-c")]
orders = st.tuples(st.sampled_from(CUSTOMERS), st.sampled_from(POD_NAMES), st.sampled_from(NODE_PAIRS))
SENDABLE = (RentalStatus.QUEUED, RentalStatus.RETRYING, RentalStatus.SENDING)
HELD = (
    RentalStatus.RENTED,
    RentalStatus.VERIFYING,
    RentalStatus.CHECK_FAILED,
    RentalStatus.READY,
    RentalStatus.DEGRADED,
)


def some_rental_is(*states: str) -> Any:
    """Offer a rule only while it can matter: some rental is in one of `states` (as of the last step)."""
    return precondition(lambda machine: any(status in states for status in machine.statuses.values()))


@dataclass
class Harness:
    """What the machine needs from the test's fixtures; `lium` and `broker` are replaced for each history."""

    clock: Clock
    credential_id: int
    rent_as: dict[str, Callable[..., Rental]]  # per customer: submit an order for it
    operator: Any
    lium: ScriptedLium
    broker: Broker


@dataclass
class InFlight:
    """A worker between its HTTP call and recording the answer."""

    claim: Claim
    result: RentResult


def commits() -> Any:
    """Run what the step commits: on_commit callbacks (enqueues) fire at the end of the block, as in production."""
    return TestCase.captureOnCommitCallbacks(execute=True)


class EngineModel(RuleBasedStateMachine):
    harness: ClassVar[Harness]

    def __init__(self) -> None:
        super().__init__()
        harness = self.harness
        self.clock = harness.clock
        self.clock.now = START
        cache.clear()  # the idempotency promise shown to operators is cached per credential
        self.lium = harness.lium = ScriptedLium(self.clock)
        # The shortest waits the backoffs allow: half their base (the jitter's low end).
        self.lium.min_rent_gap = timedelta(seconds=django_settings.RENT_BACKOFF_BASE_SECONDS / 2)
        self.lium.min_delete_gap = timedelta(seconds=django_settings.CLUSTER_DELETE_BACKOFF_BASE_SECONDS / 2)
        self.broker = harness.broker = Broker(self.clock, TASKS)
        self.rental_ids: list[int] = []
        self.keys: dict[int, str] = {}
        self.in_flight: list[InFlight] = []
        self.last_event_id = 0
        self.timeline_state: dict[int, str] = {}
        self.statuses: dict[int, str] = {}  # as of the last step: which rules may matter
        # Every history starts from the same database and rolls back at its end.
        self.history = transaction.atomic()
        self.history.__enter__()

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.history.__exit__(None, None, None)

    # Helpers ---------------------------------------------------------------------------------------------

    def pick(self, data: st.DataObject, *states: str) -> Rental:
        """Draw one of the rentals in `states` (as of the last step)."""
        candidates = sorted(pk for pk, status in self.statuses.items() if status in states)
        return Rental.objects.select_related("credential").get(
            pk=data.draw(st.sampled_from(candidates), label="rental")
        )

    def answering(
        self, rent: RentAnswer | None = None, delete: str | None = None, listing: str = LISTING_TRUTHFUL
    ) -> None:
        if rent is not None:
            self.lium.rent_answer = rent
        if delete is not None:
            self.lium.delete_answer = delete
        self.lium.listing = listing

    def send(self, claim: Claim) -> RentResult:
        rental = claim.rental
        return upstream.client_for(rental.credential).rent_cluster(
            body=bytes(rental.request_body),
            idempotency_key=str(rental.idempotency_key),
            customer_ref=rental.customer_ref,
        )

    # Setup -----------------------------------------------------------------------------------------------

    @initialize(promises_idempotency=st.booleans(), order=orders)
    def choose_the_backend(self, promises_idempotency: bool, order: tuple[str, str, tuple[str, str]]) -> None:
        self.lium.promises_idempotency = promises_idempotency
        self.submit(*order)

    @precondition(lambda self: len(self.rental_ids) < MAX_RENTALS)
    @rule(order=orders)
    def customer_rents(self, order: tuple[str, str, tuple[str, str]]) -> None:
        self.submit(*order)

    def submit(self, customer: str, pod_name: str, nodes: tuple[str, str]) -> None:
        executors = list(nodes)
        with commits():
            rental = self.harness.rent_as[customer](pod_name=pod_name, executors=executors)
        self.lium.register(str(rental.idempotency_key), pod_name=rental.pod_name, executors=executors)
        self.rental_ids.append(rental.pk)
        self.keys[rental.pk] = str(rental.idempotency_key)
        self.statuses[rental.pk] = rental.status

    # Workers and the broker ------------------------------------------------------------------------------

    def run_for(self, seconds: float, *, sweep: bool, rent: RentAnswer, delete: str, listing: str) -> None:
        """Let time pass, maybe run the sweeper (beat), then deliver every message that is due by now."""
        self.clock.advance(seconds=seconds)
        self.answering(rent, delete, listing)
        if sweep:
            with commits():
                tasks.rentals_sweep()
        self.broker.deliver_due(commits)

    @rule(
        seconds=st.sampled_from([0, 1, 3, 10]),
        sweep=st.booleans(),
        rent=rent_answers,
        delete=delete_answers,
        listing=listings,
    )
    def the_system_runs_a_moment(
        self, seconds: float, sweep: bool, rent: RentAnswer, delete: str, listing: str
    ) -> None:
        self.run_for(seconds, sweep=sweep, rent=rent, delete=delete, listing=listing)

    @rule(
        seconds=st.sampled_from([30, LEASE_SECONDS + 1, 300, 700, 3 * 3600]),
        sweep=st.booleans(),
        rent=rent_answers,
        delete=delete_answers,
        listing=listings,
    )
    def the_system_runs_a_while(self, seconds: float, sweep: bool, rent: RentAnswer, delete: str, listing: str) -> None:
        self.run_for(seconds, sweep=sweep, rent=rent, delete=delete, listing=listing)

    @some_rental_is(*SENDABLE)
    @rule(data=st.data(), rent=rent_answers)
    def duplicate_message_runs(self, data: st.DataObject, rent: RentAnswer) -> None:
        """A copy of `rental_send` (a redelivery, a sweeper's copy) runs now, due or not."""
        rental = self.pick(data, *SENDABLE)
        self.answering(rent)
        with commits():
            tasks.rental_send(rental.pk)

    @some_rental_is(RentalStatus.TERMINATING)
    @rule(data=st.data(), delete=delete_answers)
    def duplicate_delete_message_runs(self, data: st.DataObject, delete: str) -> None:
        """A copy of `rental_delete_cluster` (a redelivery, a sweeper's copy) runs now, due or not."""
        rental = self.pick(data, RentalStatus.TERMINATING)
        self.answering(delete=delete)
        with commits():
            tasks.rental_delete_cluster(rental.pk)

    @some_rental_is(*SENDABLE)
    @rule(data=st.data(), rent=rent_answers)
    def worker_starts_call(self, data: st.DataObject, rent: RentAnswer) -> None:
        """A worker claims and sends; it records the answer in a later step, or dies."""
        rental = self.pick(data, *SENDABLE)
        self.answering(rent)
        with commits():
            claim = engine.rental_claim(rental_id=rental.pk).claim
        if claim is not None:
            self.in_flight.append(InFlight(claim, self.send(claim)))

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def worker_records_answer(self, data: st.DataObject) -> None:
        call = self.in_flight.pop(data.draw(st.integers(0, len(self.in_flight) - 1), label="call"))
        with commits():
            engine.rental_record_attempt(
                claim=call.claim,
                result=call.result,
                started_at=call.claim.rental.last_sent_at or self.clock.now,
                duration_ms=5,
            )

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def worker_dies_after_its_call(self, data: st.DataObject) -> None:
        self.in_flight.pop(data.draw(st.integers(0, len(self.in_flight) - 1), label="call"))

    @some_rental_is(*SENDABLE)
    @rule(data=st.data(), rent=rent_answers, sent=st.booleans())
    def worker_dies_mid_call(self, data: st.DataObject, rent: RentAnswer, sent: bool) -> None:
        """Claim, maybe send, never record; the lease then expires."""
        rental = self.pick(data, *SENDABLE)
        self.answering(rent)
        with commits():
            claim = engine.rental_claim(rental_id=rental.pk).claim
        if claim is not None and sent:
            self.send(claim)
        self.clock.advance(seconds=LEASE_SECONDS + 1)

    @rule()
    def broker_loses_every_message(self) -> None:
        self.broker.lose_everything()

    @some_rental_is(*HELD, RentalStatus.TERMINATING)
    @rule(listing=listings)
    def pods_are_listed(self, listing: str) -> None:
        self.answering(listing=listing)
        with commits():
            members.credential_pods_sync(credential_id=self.harness.credential_id, force=True)

    # The operator -----------------------------------------------------------------------------------------

    @some_rental_is(RentalStatus.RETRYING, RentalStatus.UNKNOWN)
    @rule(data=st.data())
    def operator_retries_now(self, data: st.DataObject) -> None:
        rental = self.pick(data, RentalStatus.RETRYING, RentalStatus.UNKNOWN)
        try:
            with commits():
                ops.ops_retry_now(rental=rental, actor=self.harness.operator, reason="model")
        except ValidationError:
            return  # refused, with a reason shown on the page
        self.lium.send_at_once.add(self.keys[rental.pk])

    @some_rental_is(RentalStatus.UNKNOWN, RentalStatus.RENTED)
    @rule(data=st.data(), listing=listings)
    def operator_reconciles(self, data: st.DataObject, listing: str) -> None:
        rental = self.pick(data, RentalStatus.UNKNOWN, RentalStatus.RENTED)
        self.answering(listing=listing)
        try:
            with commits():
                ops.ops_reconcile(rental=rental, actor=self.harness.operator, reason="model")
        except ValidationError:
            pass  # e.g. a rented rental whose members are not overdue yet, or a listing that could not be read

    @some_rental_is(RentalStatus.UNKNOWN)
    @rule(data=st.data())
    def operator_confirms_what_lium_holds(self, data: st.DataObject) -> None:
        """The operator asked Lium: confirm the key's cluster if one exists, else that nothing was rented."""
        rental = self.pick(data, RentalStatus.UNKNOWN)
        created = self.lium.keys[self.keys[rental.pk]].clusters
        try:
            with commits():
                ops.ops_confirm_reconciliation(
                    rental=rental,
                    actor=self.harness.operator,
                    cluster_id=created[0] if created else None,
                    reason="model",
                )
        except ValidationError:
            pass  # another rental holds that cluster (invariant 5 says which one wrongly does)

    @some_rental_is(*HELD)
    @rule(data=st.data())
    def operator_terminates(self, data: st.DataObject) -> None:
        rental = self.pick(data, *HELD)
        try:
            with commits():
                started = ops.ops_terminate(rental=rental, actor=self.harness.operator, reason="model")
        except ValidationError:
            return  # the cluster's id is not known yet
        if started:
            self.lium.send_at_once.add(rental.cluster_id)  # a new removal DELETEs at once

    @some_rental_is(RentalStatus.CHECK_FAILED)
    @rule(data=st.data())
    def customer_keeps_it_unverified(self, data: st.DataObject) -> None:
        rental = self.pick(data, RentalStatus.CHECK_FAILED)
        with commits():
            fabric_check_keep(rental=rental, actor=None)

    @some_rental_is(RentalStatus.QUEUED)
    @rule(data=st.data())
    def operator_cancels(self, data: st.DataObject) -> None:
        rental = self.pick(data, RentalStatus.QUEUED)
        with commits():
            ops.ops_cancel(rental=rental, actor=self.harness.operator, reason="model")

    # Invariants -------------------------------------------------------------------------------------------

    def rows(self) -> list[Rental]:
        rows = list(Rental.objects.filter(pk__in=self.rental_ids).order_by("pk"))
        self.statuses = {rental.pk: rental.status for rental in rows}
        return rows

    @invariant()
    def no_second_order_without_the_promise(self) -> None:
        if self.lium.promises_idempotency:
            return
        for key, ledger in self.lium.keys.items():
            assert ledger.resent_after_possible_run == 0, (
                f"key {key}: {ledger.resent_after_possible_run} rent request(s) after one that may have run, "
                f"to a backend without rent_idempotency (clusters: {ledger.clusters})"
            )

    @invariant()
    def every_state_is_proven(self) -> None:
        assert not self.lium.unexpected, f"unexpected upstream calls: {self.lium.unexpected}"
        for rental in self.rows():
            ledger = self.lium.keys[self.keys[rental.pk]]
            created = ledger.clusters
            where = f"rental {rental.pk} is {rental.status}"
            if rental.status in (
                RentalStatus.RENTED,
                RentalStatus.VERIFYING,
                RentalStatus.CHECK_FAILED,
                RentalStatus.READY,
                RentalStatus.DEGRADED,
                RentalStatus.TERMINATING,
            ):
                assert created, f"{where} but no cluster exists for its key"
                known_pods = {pod for cid in created for pod in self.lium.clusters[cid].pod_ids}
                assert not rental.cluster_id or rental.cluster_id in created, f"{where} as {rental.cluster_id}"
                assert set(rental.pod_ids) <= known_pods, f"{where} with pods {rental.pod_ids}"
            if rental.status in (
                RentalStatus.REFUSED,
                RentalStatus.FAILED,
                RentalStatus.NOT_RENTED,
                RentalStatus.CANCELLED,
            ):
                assert not created, f"{where} but its key rented {created}"
            if rental.status == RentalStatus.CANCELLED:
                assert ledger.rent_requests == 0, f"{where} after {ledger.rent_requests} rent request(s)"
            if rental.status == RentalStatus.TERMINATED:
                assert rental.cluster_id in self.lium.delete_proven, (
                    f"{where}: no DELETE of {rental.cluster_id} proved it"
                )

    @invariant()
    def evidence_is_exclusive(self) -> None:
        rows = self.rows()
        held = [rental.cluster_id for rental in rows if rental.cluster_id]
        assert len(held) == len(set(held)), f"a cluster held by two rentals: {sorted(held)}"
        for rental in rows:
            cluster = self.lium.clusters.get(rental.cluster_id)
            key = self.keys[rental.pk]
            assert not rental.cluster_id or (cluster is not None and cluster.key == key), (
                f"rental {rental.pk} ({rental.status}) holds {rental.cluster_id}, created under key "
                f"{cluster.key if cluster else 'none of ours'}, not its own {key}"
            )
        members = ClusterMember.objects.filter(rental_id__in=self.rental_ids).values_list("pod_id", "rental_id")
        seen: dict[str, int] = {}
        for pod_id, rental_id in members:
            assert seen.setdefault(pod_id, rental_id) == rental_id, f"pod {pod_id} held by two rentals"
            assert self.lium.key_of_pod(pod_id) == self.keys[rental_id], (
                f"rental {rental_id} has member {pod_id}, created under key {self.lium.key_of_pod(pod_id)}"
            )

    @invariant()
    def at_most_one_live_retry_chain(self) -> None:
        assert not self.lium.too_soon, f"sends ahead of the schedule (two chains?): {self.lium.too_soon}"
        now = timezone.now()
        for rental in self.rows():
            if rental.status == RentalStatus.RETRYING:
                turn = rental.next_attempt_at
                live = [
                    m
                    for m in self.broker.of("rental_send", rental.pk)
                    if now < m.due and (turn is None or turn <= m.due) and m.turn in (None, rental.attempt_count + 1)
                ]
                assert len(live) <= 1, f"rental {rental.pk}: {len(live)} live rent chains (turn {turn}): {live}"
            if rental.status == RentalStatus.TERMINATING:
                turn = rental.next_delete_at
                live = [
                    m
                    for m in self.broker.of("rental_delete_cluster", rental.pk)
                    if now < m.due and (turn is None or turn <= m.due)
                ]
                assert len(live) <= 1, f"rental {rental.pk}: {len(live)} live delete chains (turn {turn}): {live}"

    @invariant()
    def verification_is_truthful(self) -> None:
        """Issue 27: only an opted-in rental is verified; `check_failed` and a verified `ready` say what the check
        found; a check that ended holds no key."""
        for rental in self.rows():
            check = FabricCheck.objects.filter(rental=rental).first()
            visited = RentalEvent.objects.filter(rental=rental, to_status=RentalStatus.VERIFYING).exists()
            assert rental.verify_fabric == (check is not None), f"rental {rental.pk}: verify_fabric without its check"
            assert not visited or rental.verify_fabric, f"rental {rental.pk} was verified without opting in"
            if check is None:
                continue
            if rental.status == RentalStatus.CHECK_FAILED:
                assert check.status in ("failed", "error"), f"rental {rental.pk} check_failed, its check {check.status}"
            if RentalEvent.objects.filter(
                rental=rental, from_status=RentalStatus.VERIFYING, to_status=RentalStatus.READY
            ).exists():
                assert check.status == "passed", f"rental {rental.pk} ready after verifying, check {check.status}"
            if check.status not in ("pending", "running"):
                assert check.private_key_encrypted == "", f"rental {rental.pk}: the check ended, its key is kept"

    @invariant()
    def timeline_is_a_legal_path(self) -> None:
        events = RentalEvent.objects.filter(rental_id__in=self.rental_ids, id__gt=self.last_event_id).order_by("id")
        for event in events.values("id", "rental_id", "kind", "from_status", "to_status"):
            self.last_event_id = event["id"]
            if event["kind"] == RentalEvent.Kind.CREATED:
                self.timeline_state[event["rental_id"]] = event["to_status"]
                continue
            if not event["from_status"]:
                continue
            before, after = event["from_status"], event["to_status"]
            assert can_transition(before, after), f"illegal {before} → {after} on the timeline: {event}"
            assert self.timeline_state.get(event["rental_id"]) == before, (
                f"the timeline jumps: {self.timeline_state.get(event['rental_id'])} then {before} → {after}"
            )
            self.timeline_state[event["rental_id"]] = after
        for rental in self.rows():
            assert rental.status in RentalStatus.values, f"unknown status {rental.status!r}"
            assert rental.status == self.timeline_state.get(rental.pk), (
                f"rental {rental.pk} is {rental.status} but its timeline ends in {self.timeline_state.get(rental.pk)}"
            )


@pytest.fixture
def rent_as(alice, acme, bob, globex, enqueued) -> dict[str, Callable[..., Rental]]:  # type: ignore[no-untyped-def]
    """Per customer, submit an order as its member: Alice for Acme, Bob for Globex, on the one credential."""

    def rent(user: Any, customer: Any) -> Callable[..., Rental]:
        def make(*, pod_name: str, executors: list[str]) -> Rental:
            # Issue 27: orders for the second pod name opt in to the fabric check (its key joins the order's keys);
            # decided by the order alone, so a replayed history draws the same.
            verify = pod_name == POD_NAMES[1]
            check = CheckPlan(key=check_key_generate(), link_rate_gbps=400) if verify else None
            keys = [SSH_KEY, check.key.public_line] if check else [SSH_KEY]
            order = RentOrder(fabric_id="fab-1", executor_ids=executors, pod_name=pod_name, public_keys=keys)
            return rental_submit(
                user=user, customer=customer, order=order, customer_ref=customer.customer_ref, check=check
            )

        return make

    assert acme.default_credential_id == globex.default_credential_id
    return {"acme": rent(alice, acme), "globex": rent(bob, globex)}


@pytest.fixture
def model_world(
    rent_as, engine_settings, credential, olga, clock: Clock, monkeypatch: pytest.MonkeyPatch, settings
) -> Harness:  # type: ignore[no-untyped-def]
    """Wire the engine to the machine's scripted Lium, broker and clock."""
    settings.SWEEP_INTERVAL_SECONDS = 5
    settings.RENT_LEASE_SECONDS = LEASE_SECONDS
    settings.CLUSTER_DELETE_BACKOFF_BASE_SECONDS = 15
    settings.CLUSTER_DELETE_BACKOFF_CAP_SECONDS = 120
    settings.RECONCILE_LOOK_BASE_SECONDS = 15
    settings.RECONCILE_MAX_LOOKS = 3
    settings.RENT_MEMBERS_GRACE_SECONDS = 600
    harness = Harness(
        clock=clock,
        credential_id=credential.pk,
        rent_as=rent_as,
        operator=olga,
        lium=ScriptedLium(clock),
        broker=Broker(clock, TASKS),
    )
    real_client_for = upstream.client_for

    def client_for(credential: Any, *, http: httpx.Client | None = None) -> upstream.LiumClient:
        transport = httpx.MockTransport(lambda request: harness.lium.handle(request))
        return real_client_for(credential, http=http or httpx.Client(transport=transport))

    monkeypatch.setattr(upstream, "client_for", client_for)
    monkeypatch.setattr(
        "rentals.enqueue._enqueue",
        lambda task_name, *args, countdown=None: harness.broker.enqueue(task_name, *args, countdown=countdown),
    )
    monkeypatch.setattr(
        "rentals.idempotency_promise.upstream_promises_idempotency",
        lambda credential: harness.lium.promises_idempotency,
    )
    # The fabric check's SSH sessions are the runner's tests' (tests/fabric_check): here a check passes on the first
    # node pair and fails (naming rank 1) on the others, so both ways out of `verifying` occur.
    monkeypatch.setattr(
        "rentals.verification.perform._members_of",
        lambda rental: [int(list(rental.executor_ids) != list(NODE_PAIRS[0]))],
    )
    monkeypatch.setattr("rentals.verification.perform.fabric_check_run_sync", _scripted_check)
    return harness


def _scripted_check(members: list[int], **_kwargs: Any) -> FabricCheckResult:
    passed = members[0] == 0
    return FabricCheckResult(
        status="passed" if passed else "failed",
        floor_gbps=2240.0,
        bus_bandwidth_gbps=2880.0 if passed else 576.0,
        slow_members=[] if passed else [1],
        key_removed={0: True, 1: True},
    )


def test_the_engine_keeps_its_promises_whatever_lium_answers(model_world: Harness) -> None:
    EngineModel.harness = model_world
    run_state_machine_as_test(
        EngineModel,
        settings=hypothesis_settings(
            # ENGINE_MODEL_EXAMPLES=500 for a deeper run by hand; 40 keeps the suite fast.
            max_examples=int(os.environ.get("ENGINE_MODEL_EXAMPLES", "40")),
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )


# --- Defects the model found, each as a plain example (the coordinator fixes them) -----------------------------


def test_an_operator_reconcile_during_an_unreadable_listing_is_answered_not_a_server_error(
    make_rental, fake_upstream: FakeUpstream, olga, client_for
) -> None:
    rental = make_rental(status=RentalStatus.UNKNOWN, possibly_sent=True, attempt_count=1)
    fake_upstream.pods = {"detail": "pods are being migrated"}  # type: ignore[assignment]  # not a list
    response = client_for(olga).post(
        f"/ops/rentals/{rental.public_id}/reconcile/", {"confirm": "on", "reason": "the customer asks"}
    )
    assert response.status_code in (200, 302)
    rental.refresh_from_db()
    assert rental.status == RentalStatus.UNKNOWN


def test_an_operator_retry_now_on_a_retrying_rental_leaves_one_live_retry_chain(
    promising_backend,
    make_rental,
    fake_upstream: FakeUpstream,
    enqueued: Enqueued,
    clock: Clock,
    olga,
    django_capture_on_commit_callbacks,
) -> None:
    rental = make_rental()
    enqueued.calls.clear()
    fake_upstream.script = [
        error(429, "rate_limited", "Slow down", headers={"Retry-After": "900"}),
        error(503, "unavailable", "Service unavailable"),
    ]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(rental.pk) == RentalStatus.RETRYING  # its follow-up is due in 900 s
    with django_capture_on_commit_callbacks(execute=True):
        ops.ops_retry_now(rental=Rental.objects.get(pk=rental.pk), actor=olga, reason="the customer is waiting")
    [operators_send] = [args for args, countdown in enqueued.of("rental_send") if not countdown]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.rental_send(*send_args(operators_send)) == RentalStatus.RETRYING  # its follow-up is due in 2-4 s
    rental.refresh_from_db()

    # A message can claim the next turn if it comes at or after it and is for it (or for any turn).
    next_turn = rental.attempt_count + 1
    follow_ups = [
        (args, clock.now + timedelta(seconds=countdown or 0)) for args, countdown in enqueued.of("rental_send")
    ]
    able_to_claim = [
        args
        for args, due in follow_ups
        if due > clock.now and due >= rental.next_attempt_at and args[1:] in ((), (next_turn,))
    ]
    assert len(able_to_claim) == 1, (
        f"{len(able_to_claim)} delayed messages can claim the turn at {rental.next_attempt_at}"
    )
    # The 900 s message of the schedule the operator overrode finds its turn taken and sends nothing.
    [(overridden, _)] = [(args, countdown) for args, countdown in enqueued.of("rental_send") if countdown == 900]
    clock.advance(seconds=900)
    assert tasks.rental_send(*send_args(overridden)) == engine.STALE_TURN
    assert len(fake_upstream.rent_requests) == 2
