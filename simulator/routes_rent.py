"""POST /executors/cluster/rent: auth, idempotency, faults, validation and commit."""

from __future__ import annotations

import time
from typing import Any

from werkzeug.wrappers import Request, Response

from . import idempotency, misbehaviour, rent
from .clock import iso
from .errors import ApiError, envelope
from .httpkit import DropConnection, after_commit_faults, before_commit_faults, dumps, json_response, pre_faults
from .state import State
from .validation import IDEMPOTENCY_KEY_RE, customer_ref_problem

ROUTE = "rent"


def _fresh_checks(
    state: State, request: Request, entry: dict[str, Any], honour_key: bool
) -> tuple[dict[str, Any], str | None]:
    """Run the checks that come before the key lookup; their refusals are never stored."""
    pre_faults(state, ROUTE)
    cred = state.authenticate(request.headers)
    entry["api_key_id"] = cred["id"]
    state.require_scope(cred, "rent")
    if state.config["multinode_clusters_enabled"] is False:
        # The backend enforces Lium's cluster switch here (lium-core: off -> a button "that 403s").
        raise ApiError(
            403,
            "multinode_clusters_disabled",
            "Multi-node cluster renting is switched off",
            hint="Try again once multinode_clusters_enabled is true in GET /v1/shared-config.",
        )
    state.check_budget(cred)
    header_ref = request.headers.get("X-Customer-Ref")
    if header_ref is not None:
        problem = customer_ref_problem(header_ref)
        if problem:
            raise ApiError(
                422,
                "invalid_customer_ref",
                f"{problem}; got {header_ref[:80]!r}",
                hint="Use a short tag such as 'acme:project-7'.",
            )
    customer_ref = header_ref if header_ref is not None else cred["customer_ref"]
    entry["customer_ref"] = customer_ref
    key = entry["idempotency_key"]
    if honour_key and key is not None and not IDEMPOTENCY_KEY_RE.match(key):
        raise ApiError(
            422,
            "invalid_idempotency_key",
            "Idempotency-Key must be 1-255 printable ASCII characters without spaces",
        )
    return cred, customer_ref


def handle_rent(state: State, request: Request) -> Response:
    """Serve one rent call; the app has opened its request journal entry."""
    rid = request.environ["lium_sim.request_id"]
    raw = request.get_data(cache=True)
    entry = request.environ["lium_sim.log_entry"]
    honour_key = bool(state.config["honour_idempotency_key"])
    cred, customer_ref = _fresh_checks(state, request, entry, honour_key)
    account = cred["account_id"]
    # A backend that does not honour the key never looks it up: a repeat is a new order.
    key = entry["idempotency_key"] if honour_key else None
    if key is not None:
        stored = idempotency.claim(state, account, key, entry["body_sha256"])
        if stored is not None:
            entry["replayed"] = True
            return json_response(stored["body"], stored["status"], {"Idempotent-Replayed": "true"})
    try:
        try:
            before_commit_faults(state, ROUTE)
        except (ApiError, DropConnection):
            if key is not None:
                idempotency.release(state, account, key)  # nothing happened, so the key is free again
            raise
        slow = state.faults.take("slow_commit", ROUTE)
        if slow:
            time.sleep(float(slow.get("seconds", 2)))  # the claim stays in_progress meanwhile
        unknown = state.faults.take("outcome_unknown", ROUTE)
        garble = None if unknown else _take_garble(state)
        if garble and not garble.get("commit", True):
            if key is not None:
                idempotency.release(state, account, key)  # nothing was rented, so the key is free again
            return _garbled(state, garble, rid, 200, None)
        do_process = True
        if unknown:
            commit = unknown.get("commit", True)
            do_process = state.faults.chance(float(commit)) if not isinstance(commit, bool) else commit
        status, body = _decide(state, cred, raw, rid, customer_ref, entry) if do_process else (0, b"")
        if unknown:
            if key is not None:
                idempotency.mark_unknown(state, account, key)
            if unknown.get("response") == "drop":
                raise DropConnection()
            raise ApiError(
                int(unknown.get("status", 502)),
                "bad_gateway",
                "Upstream error (injected; outcome not recorded)",
            )
        if key is not None:
            idempotency.store(state, account, key, status, body)  # the real answer, whatever this one looks like
        return _answer_after_commit(state, request, rid, status, body, garble)
    except (ApiError, DropConnection):
        raise
    except Exception:
        if key is not None:
            idempotency.mark_unknown(state, account, key)  # we cannot tell whether it rented
        raise


def _answer_after_commit(
    state: State, request: Request, rid: str, status: int, body: bytes, garble: dict[str, Any] | None
) -> Response:
    """Answer a committed order, or lose or mangle the answer as the after-commit faults say."""
    after_commit_faults(state, ROUTE)
    if garble:
        return _garbled(state, garble, rid, status, body)
    if status == 200 and state.faults.take("no_pod_ids", ROUTE):
        body = dumps({"success": True})
    if state.faults.take("long_ids", ROUTE):
        shown = misbehaviour.long_id(rid)
        request.environ["lium_sim.shown_request_id"] = shown
        body = misbehaviour.lengthen_answer(body, shown)
    return json_response(body, status)


# Rules that replace the whole answer; each may first commit the order (option ``commit``).
GARBLES = ("html_2xx", "empty_2xx", "trickle")


def _take_garble(state: State) -> dict[str, Any] | None:
    """Return the first answer-replacing rule that fires on this call."""
    for name in GARBLES:
        rule = state.faults.take(name, ROUTE)
        if rule:
            return rule
    return None


def _garbled(state: State, rule: dict[str, Any], rid: str, status: int, body: bytes | None) -> Response:
    """Build the replacement answer; ``body`` is the real answer, or None when nothing was rented."""
    if rule["fault"] == "html_2xx":
        return misbehaviour.html_response(int(rule.get("status", 200)))
    if rule["fault"] == "empty_2xx":
        return misbehaviour.empty_response(int(rule.get("status", 200)))
    if body is None:
        # The headers already said 200 when the backend gave up: the body is all that tells.
        failure = ApiError(504, "gateway_timeout", "Upstream timed out (injected); nothing was rented")
        body = dumps(envelope(failure, rid))
    return misbehaviour.trickle_response(
        body,
        status,
        {"Content-Type": "application/json"},
        interval=float(rule.get("interval", 1.0)),
        seconds=float(rule.get("seconds", 120)),
        stop=state.stopping,
    )


def _decide(
    state: State, cred: dict[str, Any], raw: bytes, rid: str, customer_ref: str | None, entry: dict[str, Any]
) -> tuple[int, bytes]:
    """Validate and commit under the lock; return (status, body bytes), refusals included."""
    try:
        body = rent.parse_body(raw)
        with state.lock:
            state.refresh()
            order = rent.validate(state, body)
            rent.check_balance(state, cred, order["price"])
            fail_ranks = {}
            for rank in range(len(order["nodes"])):
                rule = state.faults.has("member_start_failure", ROUTE)
                if rule and rule.get("node_index", rank) == rank:
                    rule = state.faults.take("member_start_failure", ROUTE)
                    if rule:
                        fail_ranks[rank] = rule.get("message", "Container failed to start: image pull timed out")
            result = rent.commit(state, cred, order, customer_ref, fail_ranks)
            state.ledger.append(
                {
                    "idempotency_key": entry["idempotency_key"],
                    "account": cred["account_id"],
                    "api_key_id": cred["id"],
                    "body_sha256": entry["body_sha256"],
                    "cluster_id": result["cluster_id"],
                    "pod_ids": result["pod_ids"],
                    "pod_name": order["name"],
                    "executor_uuids": [n["id"] for _, n in order["nodes"]],
                    "customer_ref": customer_ref,
                    "price_per_hour": order["price"],
                    "committed_at": iso(state.clock.now()),
                    "request_id": rid,
                }
            )
        return 200, dumps(result)
    except ApiError as err:
        return err.status, dumps(envelope(err, rid))
