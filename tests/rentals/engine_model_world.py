"""The world of the engine's model-based test: a scripted Lium that knows the truth, and a broker on a clock.

`ScriptedLium` answers the rent, pod and delete calls at the transport (`httpx.MockTransport`) with the
answer a test step chose, and keeps the ledger a real Lium would: which clusters exist for which
idempotency key, which rent requests it received, which DELETEs it accepted. Like one Lium account shared
by several customers, it rents a node to one order at a time (an order for a node a live cluster runs on is
refused with 409), whoever asks. The test's invariants compare
what the dashboard claims with this ledger.

`Broker` stands for Celery: it keeps every enqueued message with the time it becomes due, and delivers the
due ones when a step asks, so a retry chain, a sweeper's copy or a lost message can be counted.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx

from tests.rentals.fakes import Clock

# --- Rent answers ---------------------------------------------------------------------------------------------

CONFIRMED = "confirmed"  # 200 with pod ids and a cluster id
CONFIRMED_WITHOUT_IDS = "confirmed_without_ids"  # 200 `{"success": true}`: rented, but nothing names the cluster
HTML_PAGE = "html_page"  # 200 with a maintenance page: may or may not have rented
OVERLONG_IDS = "overlong_ids"  # 200 whose pod id does not fit its column (and a request id too long)
DROPPED_AFTER_SEND = "dropped_after_send"  # the connection broke after the request left
READ_TIMEOUT = "read_timeout"  # an answer that trickles in past the deadline
NEVER_CONNECTED = "never_connected"  # no byte reached the server
IN_PROGRESS = "in_progress"  # 409 idempotency_in_progress
OUTCOME_UNKNOWN = "outcome_unknown"  # 409 idempotency_outcome_unknown
SERVER_ERROR = "server_error"  # 503 (with a request id too long for its column)
RATE_LIMITED = "rate_limited"  # 429, maybe with Retry-After: the server did not run the request
FRESH_REFUSAL = "fresh_refusal"  # a 4xx decided now (e.g. 401/403 before the key lookup)
REPLAYED_REFUSAL = "replayed_refusal"  # the stored refusal of the key's first request

ALWAYS_RENTS = frozenset({CONFIRMED, CONFIRMED_WITHOUT_IDS, OVERLONG_IDS})
# The answer does not show whether the server rented; the step says (`RentAnswer.rented`).
MAY_RENT = frozenset({HTML_PAGE, DROPPED_AFTER_SEND, READ_TIMEOUT, IN_PROGRESS, OUTCOME_UNKNOWN, SERVER_ERROR})
# The server did not run these requests: they never count as possibly sent.
NOT_RUN = frozenset({NEVER_CONNECTED, RATE_LIMITED})
RENT_KINDS = sorted(ALWAYS_RENTS | MAY_RENT | NOT_RUN | {FRESH_REFUSAL, REPLAYED_REFUSAL})

# --- Delete answers and pod listings ---------------------------------------------------------------------------

DELETE_TRUTHFUL = "truthful"  # 200 with member rows while the cluster exists, 404 once it is gone
DELETE_OUTAGE = "outage"  # 503
DELETE_WITHOUT_ROWS = "without_rows"  # 200 `{"pods": []}`: unreadable, never a removal
DELETE_CONFLICT = "conflict"  # 409 a member is still being created (only while it exists)
DELETE_FORBIDDEN = "forbidden"  # 403 nothing removed (only while it exists)
DELETE_KINDS = [DELETE_TRUTHFUL, DELETE_OUTAGE, DELETE_WITHOUT_ROWS, DELETE_CONFLICT, DELETE_FORBIDDEN]

LISTING_TRUTHFUL = "truthful"  # every live pod of the ledger, and a stranger's cluster
LISTING_EMPTY = "empty"  # `[]` although clusters exist (a glitch)
LISTING_NOT_A_LIST = "not_a_list"  # `{"detail": ...}`
LISTING_BAD_ROW = "bad_row"  # a row without an id
LISTING_KINDS = [LISTING_TRUTHFUL, LISTING_EMPTY, LISTING_NOT_A_LIST, LISTING_BAD_ROW]

LONG_REQUEST_ID = "r" * 300
STRANGER_PODS = [
    {"id": "x-1", "status": "RUNNING", "cluster_id": "cl-stranger", "pod_name": "someone-else", "executor": {"id": "x"}}
]


@dataclass(frozen=True)
class RentAnswer:
    """What the server answers to one rent request, and (where the answer does not show it) whether it rented."""

    kind: str
    rented: bool = False
    status: int = 403  # for a refusal
    retry_after: int | None = None  # for a 429

    def rents(self) -> bool:
        return self.kind in ALWAYS_RENTS or (self.kind in MAY_RENT and self.rented)

    def may_have_run(self) -> bool:
        return self.kind not in NOT_RUN


@dataclass
class Cluster:
    id: str
    key: str
    pod_ids: list[str]
    executors: list[str]
    pod_name: str
    created_at: datetime
    deleted: bool = False

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "id": pod_id,
                "status": "RUNNING",
                "cluster_id": self.id,
                "cluster_node_index": rank,
                "pod_name": self.pod_name,
                "executor": {"id": executor},
                "ssh_connect_cmd": f"ssh root@10.0.0.{rank + 1} -p 22",
                "created_at": self.created_at.isoformat().replace("+00:00", "Z"),
            }
            for rank, (pod_id, executor) in enumerate(zip(self.pod_ids, self.executors, strict=True))
        ]


@dataclass
class KeyLedger:
    """What the server knows about one idempotency key (one rental)."""

    pod_name: str
    executors: list[str]
    clusters: list[str] = field(default_factory=list)
    rent_requests: int = 0
    # Rent requests received after one that may have run (each is a second order on a backend without the promise).
    resent_after_possible_run: int = 0
    possibly_run: bool = False


class ScriptedLium:
    """The upstream: answers each call as the current step chose, and keeps the truth in its ledger."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.promises_idempotency = True
        self.rent_answer = RentAnswer(CONFIRMED)
        self.delete_answer = DELETE_TRUTHFUL
        self.listing = LISTING_TRUTHFUL
        self.keys: dict[str, KeyLedger] = {}
        self.clusters: dict[str, Cluster] = {}
        # Cluster ids whose removal Lium accepted (200 with rows) or denied knowing (404).
        self.delete_proven: set[str] = set()
        self.unexpected: list[str] = []
        # The schedule: two sends of one key (or DELETEs of one cluster) never closer than these, unless an
        # operator asked to send at once (`send_at_once`). Set by the test from the backoff settings.
        self.min_rent_gap = timedelta(0)
        self.min_delete_gap = timedelta(0)
        self.send_at_once: set[str] = set()  # keys and cluster ids whose next call may come at once
        self.last_call: dict[str, datetime] = {}
        self.too_soon: list[str] = []

    def register(self, key: str, *, pod_name: str, executors: list[str]) -> None:
        self.keys[key] = KeyLedger(pod_name=pod_name, executors=list(executors))

    def live_clusters(self, key: str) -> list[Cluster]:
        return [self.clusters[cid] for cid in self.keys[key].clusters if not self.clusters[cid].deleted]

    def nodes_taken(self, executors: list[str]) -> bool:
        """Return whether a live cluster (of any key) runs on one of `executors`."""
        return any(set(cluster.executors) & set(executors) for cluster in self.clusters.values() if not cluster.deleted)

    def key_of_pod(self, pod_id: str) -> str | None:
        """Return the idempotency key whose order created the pod, or None for a stranger's."""
        return next((cluster.key for cluster in self.clusters.values() if pod_id in cluster.pod_ids), None)

    def _on_schedule(self, what: str, name: str, gap: timedelta) -> None:
        """Note a call that comes sooner after the previous one than any backoff allows."""
        now = self.clock.now
        previous = self.last_call.get(name)
        if previous is not None and now - previous < gap and name not in self.send_at_once:
            self.too_soon.append(f"{what} {name} {(now - previous).total_seconds():g} s after the previous one")
        self.send_at_once.discard(name)
        self.last_call[name] = now

    # The transport -----------------------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        request.read()
        path = request.url.path
        if request.method == "POST" and path.endswith("/executors/cluster/rent"):
            return self._rent(request)
        if request.method == "GET" and path.endswith("/pods"):
            return self._listing()
        if request.method == "DELETE" and "/clusters/" in path:
            return self._delete(path.rsplit("/", 1)[1])
        if request.method == "GET" and path.endswith("/events"):
            return httpx.Response(200, json=[])  # why a member failed: the model keeps no pod history to tell
        self.unexpected.append(f"{request.method} {path}")
        return httpx.Response(500, json={"detail": "the model does not expect this call"})

    def _rent(self, request: httpx.Request) -> httpx.Response:
        key = request.headers["Idempotency-Key"]
        ledger = self.keys[key]
        answer = self.rent_answer
        if answer.kind == REPLAYED_REFUSAL and (ledger.clusters or not self.promises_idempotency):
            # A replay only exists where the server keeps answers, and only a refusal that rented nothing.
            answer = RentAnswer(FRESH_REFUSAL, status=409)
        self._on_schedule("rent", key, self.min_rent_gap)
        if answer.kind == NEVER_CONNECTED:
            raise httpx.ConnectError("connection refused", request=request)
        replay_of = ledger.clusters[0] if self.promises_idempotency and ledger.clusters else None
        if answer.rents() and replay_of is None and self.nodes_taken(ledger.executors):
            # Another order (another customer's, on this same account) holds one of these nodes.
            answer = RentAnswer(FRESH_REFUSAL, status=409)
        ledger.rent_requests += 1
        if ledger.possibly_run:
            ledger.resent_after_possible_run += 1
        ledger.possibly_run = ledger.possibly_run or answer.may_have_run()
        cluster = self.clusters[replay_of] if replay_of else None
        if answer.rents() and replay_of is None:
            cluster = self._new_cluster(key, ledger)
        return self._rent_response(request, answer, cluster, replayed=replay_of is not None)

    def _new_cluster(self, key: str, ledger: KeyLedger) -> Cluster:
        number = len(self.clusters) + 1
        cluster = Cluster(
            id=f"cl-{number}",
            key=key,
            pod_ids=[f"cl-{number}-{executor}" for executor in ledger.executors],
            executors=list(ledger.executors),
            pod_name=ledger.pod_name,
            created_at=self.clock.now,
        )
        self.clusters[cluster.id] = cluster
        ledger.clusters.append(cluster.id)
        return cluster

    def _rent_response(
        self, request: httpx.Request, answer: RentAnswer, cluster: Cluster | None, *, replayed: bool
    ) -> httpx.Response:
        kind = answer.kind
        replay_header = {"Idempotent-Replayed": "true"} if replayed else {}
        if kind == CONFIRMED and cluster is not None:
            body = {"success": True, "message": "Cluster rented", "pod_ids": cluster.pod_ids, "cluster_id": cluster.id}
            return httpx.Response(200, json=body, headers={"X-Request-Id": "req-ok", **replay_header})
        if kind == CONFIRMED_WITHOUT_IDS or (kind == CONFIRMED and cluster is None):
            return httpx.Response(200, json={"success": True, "message": "ok"}, headers=replay_header)
        if kind == HTML_PAGE:
            return httpx.Response(
                200, text="<html><body>Back soon</body></html>", headers={"Content-Type": "text/html"}
            )
        if kind == OVERLONG_IDS:
            body = {"success": True, "pod_ids": ["p" * 150], "cluster_id": "c" * 250}
            return httpx.Response(200, json=body, headers={"X-Request-Id": LONG_REQUEST_ID})
        if kind == DROPPED_AFTER_SEND:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        if kind == READ_TIMEOUT:
            raise httpx.ReadTimeout("The answer trickled in past the deadline.", request=request)
        if kind == IN_PROGRESS:
            return _error(409, "idempotency_in_progress", "The first request is still running.")
        if kind == OUTCOME_UNKNOWN:
            return _error(409, "idempotency_outcome_unknown", "The outcome of the first request is unknown.")
        if kind == SERVER_ERROR:
            return _error(503, "unavailable", "Service unavailable", request_id=LONG_REQUEST_ID)
        if kind == RATE_LIMITED:
            headers = {"Retry-After": str(answer.retry_after)} if answer.retry_after is not None else {}
            return _error(429, "rate_limited", "Slow down", headers=headers)
        if kind == REPLAYED_REFUSAL:
            return _error(
                409, "executor_not_available", "Those nodes are taken.", headers={"Idempotent-Replayed": "true"}
            )
        return _error(answer.status, "forbidden" if answer.status == 403 else "", "Refused now.")

    def _listing(self) -> httpx.Response:
        if self.listing == LISTING_EMPTY:
            return httpx.Response(200, json=[])
        if self.listing == LISTING_NOT_A_LIST:
            return httpx.Response(200, json={"detail": "pods are being migrated"})
        rows = [row for cluster in self.clusters.values() if not cluster.deleted for row in cluster.rows()]
        if self.listing == LISTING_BAD_ROW:
            rows = [*rows, {"status": "RUNNING", "cluster_id": "cl-stranger"}]
        return httpx.Response(200, json=rows + STRANGER_PODS)

    def _delete(self, cluster_id: str) -> httpx.Response:
        self._on_schedule("DELETE", cluster_id, self.min_delete_gap)
        cluster = self.clusters.get(cluster_id)
        exists = cluster is not None and not cluster.deleted
        kind = self.delete_answer
        if kind == DELETE_OUTAGE:
            return _error(503, "unavailable", "Service unavailable")
        if kind == DELETE_WITHOUT_ROWS:
            return httpx.Response(200, json={"cluster_id": cluster_id, "success": True, "pods": []})
        if not exists:
            # Lium's truthful answer for a cluster no pod carries (also the answer to a conflict or a denial).
            self.delete_proven.add(cluster_id)
            return _error(404, "not_found", "No pods in this cluster.")
        assert cluster is not None
        if kind == DELETE_CONFLICT:
            return _error(409, "conflict", "A member is still being created.")
        if kind == DELETE_FORBIDDEN:
            return _error(403, "forbidden", "The key lacks the manage scope.")
        cluster.deleted = True
        self.delete_proven.add(cluster_id)
        rows = [{"pod_id": pod_id, "success": True, "message": "Pod deletion started"} for pod_id in cluster.pod_ids]
        return httpx.Response(200, json={"cluster_id": cluster_id, "success": True, "message": "ok", "pods": rows})


def _error(
    status: int, code: str, message: str, *, request_id: str = "req-1", headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {"success": False, "error": {"code": code, "message": message, "hint": "", "request_id": request_id}}
    return httpx.Response(
        status, content=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )


# --- The broker -----------------------------------------------------------------------------------------------


@dataclass
class Message:
    task: str  # the task's short name, e.g. "rental_send"
    args: tuple[object, ...]
    due: datetime
    delayed: bool  # enqueued with a countdown (a scheduled follow-up), not for now
    number: int  # the order it was enqueued in

    @property
    def turn(self) -> object:
        """The attempt a `rental_send` is for (its second argument), or None: any turn."""
        return self.args[1] if len(self.args) > 1 else None


class Broker:
    """Celery, as far as the engine sees it: messages wait until their countdown has passed, then run."""

    MAX_DELIVERIES_PER_STEP = 40

    def __init__(self, clock: Clock, tasks: dict[str, Callable[..., object]]) -> None:
        self.clock = clock
        self.tasks = tasks
        self.pending: list[Message] = []
        self.delivered = 0
        self.numbers = itertools.count(1)

    def enqueue(self, task_name: str, *args: object, countdown: float | None = None) -> None:
        name = task_name.rsplit(".", 1)[-1]
        due = self.clock.now + timedelta(seconds=countdown or 0)
        self.pending.append(Message(name, args, due, delayed=bool(countdown), number=next(self.numbers)))

    def of(self, task: str, rental_id: int) -> Iterator[Message]:
        """Return the pending messages of `task` for the rental (its first argument; a turn may follow)."""
        return (message for message in self.pending if message.task == task and message.args[:1] == (rental_id,))

    def deliver_due(self, commits: Callable[[], AbstractContextManager[object]]) -> int:
        """Run due messages, earliest first (and what they enqueue for now), each in its own transaction."""
        done = 0
        while done < self.MAX_DELIVERIES_PER_STEP:
            due = [message for message in self.pending if message.due <= self.clock.now]
            if not due:
                break
            message = min(due, key=lambda message: message.due)
            self.pending.remove(message)
            with commits():
                self.tasks[message.task](*message.args)
            done += 1
        self.delivered += done
        return done

    def lose_everything(self) -> None:
        """The broker restarts without its messages (the sweeper must find the rows again)."""
        self.pending.clear()
