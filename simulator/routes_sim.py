"""The /_sim/* control endpoints (dev and test modes only)."""

from __future__ import annotations

from werkzeug.wrappers import Request, Response

from . import billing
from .clock import iso
from .errors import ApiError
from .faults import ROUTES, FaultConfigError
from .httpkit import json_object, json_response
from .request_log import view
from .state import State

CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "start_seconds": (int, float),
    "delete_seconds": (int, float),
    "pods_rate_limit_per_min": (int,),
    "cancel_inflight_creates": (bool,),
    "replenish": (bool,),
    "features": (list,),
    "idempotency_ttl_seconds": (int, float),
    "honour_idempotency_key": (bool,),
    "multinode_clusters_enabled": (bool, type(None)),  # null: `GET /v1/shared-config` leaves the field out
    "events_for_api_keys": (bool,),
    "ssh": (bool,),
    "slow_executors": (list,),
    "unreachable_executors": (list,),
    "refuse_key_executors": (list,),
    "stalled_executors": (list,),
    "broken_executors": (list,),
    # Nodes someone else holds (outside the dashboard): hidden from the offers and refused when rented.
    "taken_executors": (list,),
}
EXECUTOR_LISTS = tuple(name for name in CONFIG_TYPES if name.endswith("_executors"))


def faults(state: State, request: Request) -> Response:
    """Show (GET), replace (POST) or clear (DELETE) the fault rules."""
    if request.method == "POST":
        try:
            state.faults.configure(json_object(request))
        except FaultConfigError as exc:
            raise ApiError(422, "invalid_faults", str(exc)) from exc
    elif request.method == "DELETE":
        state.faults.clear()
    return json_response(state.faults.describe())


def clock(state: State, request: Request) -> Response:
    """Show or advance the simulated clock."""
    if request.method == "POST":
        seconds = json_object(request).get("advance_seconds", 0)
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise ApiError(422, "validation_error", "advance_seconds must be a number >= 0")
        state.clock.advance(float(seconds))
        with state.lock:
            state.refresh()
    now = state.clock.now()
    return json_response({"now": iso(now), "epoch": now, "offset_seconds": state.clock.offset})


def config(state: State, request: Request) -> Response:
    """Show or change runtime settings (start_seconds, pods_rate_limit_per_min, ...)."""
    if request.method == "POST":
        body = json_object(request)
        if "balances" in body:  # not a setting: it sets the accounts' balances (simulator/billing.py)
            billing.set_balances(state, body.pop("balances"))
        for name, value in body.items():
            types = CONFIG_TYPES.get(name)
            if types is None:
                raise ApiError(422, "unknown_setting", f"unknown setting {name!r}; known: {sorted(CONFIG_TYPES)}")
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ApiError(422, "validation_error", f"{name} has the wrong type")
            if name in EXECUTOR_LISTS and not (isinstance(value, list) and all(isinstance(i, str) for i in value)):
                raise ApiError(422, "validation_error", f"{name} must be a list of executor ids")
        with state.lock:
            state.config.update(body)
    with state.lock:
        state.refresh()
        balances = {account_id: billing.balance(state, account_id) for account_id in sorted(state.accounts)}
        return json_response({**state.config, "balances": balances})


def ledger(state: State, request: Request) -> Response:
    """List every committed rent."""
    with state.lock:
        return json_response(list(state.ledger))


def requests_log(state: State, request: Request) -> Response:
    """List the rent calls received, in order; ``?route=*`` or ``?route=<name>`` for other routes."""
    route = request.args.get("route")
    if route is not None and route not in ROUTES:
        raise ApiError(422, "validation_error", f"unknown route {route!r}; known: {sorted(ROUTES)}")
    return json_response(view(state, route))


def authorized_keys(state: State, request: Request, pod_id: str) -> Response:
    """List a pod's authorized keys (the order's public keys, less those removed over SSH)."""
    with state.lock:
        state.refresh()
        pod = state.pods.get(pod_id)
        if pod is None:
            raise ApiError(404, "pod_not_found", f"Pod {pod_id} not found")
        return json_response({"pod_id": pod_id, "authorized_keys": list(pod["authorized_keys"])})


def reset(state: State, request: Request) -> Response:
    """Restore the seed state and clear faults, ledger, request log and clock offset."""
    state.reset()
    return json_response({"reset": True})
