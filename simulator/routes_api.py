"""The public upstream routes other than the cluster rent."""

from __future__ import annotations

import math
import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from . import __version__, billing, event_log, misbehaviour
from .clock import iso, parse_iso
from .errors import ApiError, field_error, rate_limited
from .httpkit import (
    DropConnection,
    after_commit_faults,
    before_commit_faults,
    json_body,
    json_response,
    pre_faults,
)
from .state import State
from .validation import ssh_key_problem


def _auth(state: State, request: Request, route: str, scope: str = "read") -> dict[str, Any]:
    pre_faults(state, route)
    cred = state.authenticate(request.headers)
    entry = request.environ.get("lium_sim.log_entry")
    if entry is not None:
        entry["api_key_id"] = cred["id"]  # which key called: a test can tell whose account was read
    state.require_scope(cred, scope)
    before_commit_faults(state, route)
    return cred


def version(state: State, request: Request) -> Response:
    """Return the version and optional features (no credential needed)."""
    pre_faults(state, "version")
    before_commit_faults(state, "version")
    features = list(state.config["features"])
    if not state.config["honour_idempotency_key"]:
        features = [f for f in features if f != "rent_idempotency"]  # we do not promise what we do not keep
    return json_response({"version": f"lium-sim-{__version__}", "features": features})


def offers(state: State, request: Request) -> Response:
    """List fabric offers with their free nodes."""
    _auth(state, request, "offers")
    return json_response(state.offers())


def templates(state: State, request: Request) -> Response:
    """List templates."""
    _auth(state, request, "templates")
    return json_response(state.templates)


def list_ssh_keys(state: State, request: Request) -> Response:
    """List the account's registered SSH keys."""
    cred = _auth(state, request, "ssh-keys")
    with state.lock:
        return json_response(list(state.ssh_keys[cred["account_id"]]))


def add_ssh_key(state: State, request: Request) -> Response:
    """Register an SSH key; registering the same public key again returns the existing row."""
    cred = _auth(state, request, "ssh-keys")
    body = json_body(request)
    name = body.get("name") if isinstance(body, dict) else None
    public_key = body.get("public_key") if isinstance(body, dict) else None
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        raise field_error("name", "must be 1-64 characters")
    problem = ssh_key_problem(public_key)
    if problem:
        raise field_error("public_key", problem, code="invalid_ssh_key")
    assert isinstance(public_key, str)  # ssh_key_problem refused anything else
    with state.lock:
        rows = state.ssh_keys[cred["account_id"]]
        existing = next((r for r in rows if r["public_key"].split()[:2] == public_key.split()[:2]), None)
        if existing:
            return json_response(existing)
        row = {
            "id": str(uuid.uuid4()),
            "name": name,
            "public_key": public_key.strip(),
            "created_at": iso(state.clock.now()),
        }
        rows.append(row)
    after_commit_faults(state, "ssh-keys")
    return json_response(row)


def _pods_limiter(state: State, account: str) -> None:
    """Cap GET /pods per account in a sliding 60 s window of simulated time."""
    rule = state.faults.has("pods_rate_limit", "pods")
    limit = int(rule.get("per_min", 60)) if rule else int(state.config["pods_rate_limit_per_min"] or 0)
    if limit <= 0:
        return
    now = state.clock.now()
    with state.lock:
        hits = state.pod_hits[account]
        while hits and now - hits[0] >= 60:
            hits.popleft()
        if len(hits) >= limit:
            retry = max(1, math.ceil(hits[0] + 60 - now))
            raise rate_limited(f"Pod polling is limited to {limit} requests per minute", retry)
        hits.append(now)


def list_pods(state: State, request: Request) -> Response:
    """List the caller's pods (optionally one key's)."""
    pre_faults(state, "pods")
    cred = state.authenticate(request.headers)
    state.require_scope(cred, "read")
    _pods_limiter(state, cred["account_id"])
    before_commit_faults(state, "pods")
    malformed = state.faults.take("pods_malformed", "pods")
    if malformed:
        return misbehaviour.malformed_pods(malformed.get("shape", "object"))
    if state.faults.take("pods_empty", "pods"):
        return json_response([])
    with state.lock:
        state.refresh()
        rows = [state.render_pod(p) for p in state.visible_pods(cred, request.args.get("api_key_id"))]
    if state.faults.take("long_ids", "pods"):
        rows = misbehaviour.lengthen_pod_rows(rows)
        request.environ["lium_sim.shown_request_id"] = misbehaviour.long_id(request.environ["lium_sim.request_id"])
    return json_response(rows)


def delete_cluster(state: State, request: Request, cluster_id: str) -> Response:
    """Remove every member of a cluster, one result row per member."""
    pre_faults(state, "delete")
    cred = state.authenticate(request.headers)
    before_commit_faults(state, "delete")
    outage = state.faults.take("delete_outage", "delete")
    if outage:
        if outage.get("drop"):
            raise DropConnection()
        raise ApiError(
            int(outage.get("status", 503)),
            "service_unavailable",
            "Cluster deletion is temporarily unavailable (injected outage); nothing was removed",
            hint="Retry the delete later.",
        )
    now = state.clock.now()
    with state.lock:
        state.refresh()
        members = sorted(
            (p for p in state.pods.values() if p["cluster_id"] == cluster_id),
            key=lambda p: p["cluster_node_index"],
        )
        if not members:
            raise ApiError(404, "cluster_not_found", f"Cluster {cluster_id} not found")
        # Every check runs before the first delete, so a refusal removes nothing.
        _check_may_delete(state, cred, cluster_id, members)
        actor = event_log.actor_of(cred)
        rows = [_delete_member(state, pod, now, actor) for pod in members]
        ok = all(r["success"] for r in rows)
        failed = sum(1 for r in rows if not r["success"])
        message = (
            f"Deletion started for {len(rows)} members"
            if ok
            else f"{failed} of {len(rows)} members failed to delete; call again to retry"
        )
        state.refresh()  # delete_seconds 0 removes the rows at once
    after_commit_faults(state, "delete")
    return json_response({"cluster_id": cluster_id, "success": ok, "message": message, "pods": rows})


def _check_may_delete(state: State, cred: dict[str, Any], cluster_id: str, members: list[dict[str, Any]]) -> None:
    """Refuse a delete of another account's pods, without the scope, or while members are still created."""
    for pod in members:
        if pod["account_id"] != cred["account_id"]:
            raise ApiError(403, "forbidden", f"Pod {pod['id']} of cluster {cluster_id} belongs to another user")
        if not state.may_manage(cred, pod):
            name = cred["name"] or "session"
            raise ApiError(
                403,
                "api_key_scope",
                f"API key '{name}' does not have the 'manage' scope",
                hint="Only the key that created a pod may remove it without 'manage'.",
            )
    pending = [p["id"] for p in members if p["status"] == "PENDING"]
    if pending and not state.config["cancel_inflight_creates"]:
        msg = "Some cluster members are still being created; try again later"
        raise ApiError(
            409,
            "cluster_members_pending",
            msg,
            detail={"message": msg, "cluster_id": cluster_id, "pending_pods": pending},
        )


def _delete_member(state: State, pod: dict[str, Any], now: float, actor: dict[str, Any]) -> dict[str, Any]:
    """Start removing one member; return its result row."""
    row = {
        "pod_id": pod["id"],
        "pod_name": pod["pod_name"],
        "cluster_node_index": pod["cluster_node_index"],
        "success": True,
    }
    if pod["status"] == "DELETING":
        row["message"] = "Pod deletion is in progress"
    elif (rule := state.faults.take("member_delete_failure", "delete")) is not None:
        row.update(success=False, message=rule.get("message", "Failed to delete pod: executor unreachable"))
    elif pod["status"] == "CREATION_FAILED":
        state.remove_pod(pod)
        row["message"] = "Pod deletion started"
    else:
        state.deletion_start(pod, now, actor)
        row["message"] = "Pod deletion started"
    return row


def schedule_removal(state: State, request: Request, pod_id: str) -> Response:
    """Set (POST) or cancel (DELETE) a pod's scheduled removal; the same time twice is one schedule."""
    pre_faults(state, "schedule-removal")
    cred = state.authenticate(request.headers)
    state.check_budget(cred)
    at: float | None = None
    if request.method == "POST":
        body = json_body(request)
        value = body.get("removal_scheduled_at") if isinstance(body, dict) else None
        try:
            at = parse_iso(value) if isinstance(value, str) else None
        except ValueError:
            at = None
        if at is None:
            raise field_error("removal_scheduled_at", "must be an ISO-8601 date-time, e.g. 2030-01-01T00:00:00Z")
    before_commit_faults(state, "schedule-removal")
    with state.lock:
        state.refresh()
        pod = state.pod_for(cred, pod_id)
        if not state.may_manage(cred, pod):
            raise ApiError(403, "api_key_scope", f"API key '{cred['name']}' does not have the 'manage' scope")
        changed = pod["removal_scheduled_at"] != at
        pod["removal_scheduled_at"] = at
        pod["updated_at"] = state.clock.now()
        if changed:  # the same time twice is one schedule, and one event
            kind, text = ("schedule", f"Removal scheduled at {iso(at)}") if at else ("unschedule", "Removal cancelled")
            detail = {"removal_scheduled_at": iso(at)}
            state.add_event(pod, kind, text, pod["updated_at"], actor=event_log.actor_of(cred), detail=detail)
        state.refresh()
    after_commit_faults(state, "schedule-removal")
    return json_response({"pod_id": pod_id, "removal_scheduled_at": iso(at)})


def pod_events(state: State, request: Request, pod_id: str) -> Response:
    """List a pod's events, oldest first (also for a pod that is already gone)."""
    cred = _auth(state, request, "events")
    with state.lock:
        state.refresh()
        owner = state.event_owner.get(pod_id)
        if owner is None or not state.sees(cred, *owner):
            raise ApiError(404, "pod_not_found", f"Pod {pod_id} not found")
        return json_response(list(state.events.get(pod_id, [])))


# What `GET /users/me` says of the calling API key (a session token has none).
API_KEY_FIELDS = ("id", "name", "scopes", "visibility", "customer_ref", "max_budget_usd", "spent_total_usd")


def users_me(state: State, request: Request) -> Response:
    """Describe the caller's account, balance and credential."""
    cred = _auth(state, request, "users")
    with state.lock:
        state.refresh()  # the balance as of the sim clock's now
        acct = state.accounts[cred["account_id"]]
        return json_response(
            {
                "id": acct["id"],
                "email": acct["email"],
                "name": acct["name"],
                "balance": billing.balance(state, acct["id"]),
                "api_key": None if cred["id"] is None else {key: cred[key] for key in API_KEY_FIELDS},
            }
        )
