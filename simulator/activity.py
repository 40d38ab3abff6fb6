"""The account's event log (`GET /users/me/events`), the shared config and the out-of-band changes.

Every pod event the simulator records (`State.add_event`) also lands here in the shape lium-io's `lium audit`
reads (docs/upstream-api.md §17): `created_at`, `event_type`, `sub_event_type`, `detail`, `error`, `pod_id`,
`pod_name` and `actor` (`{auth, api_key_id, api_key_name}`, null = the platform). Like the real route there is no
event id and no cursor: a follower asks again with `since` and drops what it already saw.
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request, Response

from .clock import iso, parse_iso
from .errors import ApiError, field_error
from .httpkit import before_commit_faults, json_object, json_response, pre_faults

# Who made an out-of-band change, as `POST /_sim/out-of-band` names it -> the event's `actor.auth`.
ACTORS = {"portal": "session", "cli": "cli", "api_key": "api_key", "platform": None}
OUT_OF_BAND_ACTIONS = ("delete_pod", "reboot_pod", "schedule_removal")
EVENTS_LIMIT_MAX = 1000


def user_events(state: Any, request: Request) -> Response:
    """`GET /users/me/events`: the account's events, newest first; `limit`, `since`, `pod_id`, `api_key_id`."""
    pre_faults(state, "user-events")
    cred = state.authenticate(request.headers)
    if cred["id"] is not None and not state.config["events_for_api_keys"]:
        raise ApiError(401, "not_authenticated", "Events are not available to API keys; sign in to the portal")
    state.require_scope(cred, "read")
    before_commit_faults(state, "user-events")
    limit, since = _events_query(request)
    pod_id, key_id = request.args.get("pod_id"), request.args.get("api_key_id")
    with state.lock:
        state.refresh()
        rows = [
            row
            for row in state.activity[cred["account_id"]]
            if state.sees(cred, cred["account_id"], row["_api_key_id"])
            and (pod_id is None or row["pod_id"] == pod_id)
            and (key_id is None or row["_api_key_id"] == key_id)
            and (since is None or parse_iso(row["created_at"]) >= since)
        ]
    rows = sorted(rows, key=lambda row: row["created_at"], reverse=True)[:limit]
    return json_response([{k: v for k, v in row.items() if not k.startswith("_")} for row in rows])


def _events_query(request: Request) -> tuple[int, float | None]:
    """Read `limit` (1-1000, default 200) and `since` (ISO-8601, inclusive), else 422."""
    raw_limit = request.args.get("limit", "200")
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= EVENTS_LIMIT_MAX:
        raise field_error("limit", f"must be an integer from 1 to {EVENTS_LIMIT_MAX}")
    raw_since = request.args.get("since")
    try:
        since = parse_iso(raw_since) if raw_since else None
    except ValueError:
        raise field_error("since", "must be an ISO-8601 date-time, e.g. 2030-01-01T00:00:00Z") from None
    return int(raw_limit), since


def shared_config(state: Any, request: Request) -> Response:
    """`GET /v1/shared-config` (no auth): the fields the dashboard reads, and some lium-core requires."""
    pre_faults(state, "shared-config")
    before_commit_faults(state, "shared-config")
    body: dict[str, Any] = {
        "machine_prices": {"NVIDIA H100 80GB HBM3": 1.494},
        "machine_min_price_rate": 0.5,
        "machine_max_price_rate": 3.0,
        "max_initial_port_count": 200,
    }
    switch = state.config["multinode_clusters_enabled"]
    if switch is not None:  # null in the config: the field is left out, as an older backend would
        body["multinode_clusters_enabled"] = switch
    return json_response(body)


def out_of_band(state: Any, request: Request) -> Response:
    """`POST /_sim/out-of-band`: change a pod as the portal, the CLI or another key would, outside the dashboard."""
    body = json_object(request)
    action, who = body.get("action"), body.get("actor", "portal")
    if action not in OUT_OF_BAND_ACTIONS:
        raise ApiError(422, "validation_error", f"action must be one of {list(OUT_OF_BAND_ACTIONS)}")
    if who not in ACTORS:
        raise ApiError(422, "validation_error", f"actor must be one of {sorted(ACTORS)}")
    actor = None
    if ACTORS[who] is not None:
        name = body.get("api_key_name", "laptop") if who == "api_key" else None
        actor = {"auth": ACTORS[who], "api_key_id": f"key-{name}" if name else None, "api_key_name": name}
    with state.lock:
        state.refresh()
        pod = state.pods.get(body.get("pod_id"))
        if pod is None:
            raise ApiError(404, "pod_not_found", f"Pod {body.get('pod_id')} not found")
        now = state.clock.now()
        _apply_out_of_band(state, pod, action, body, actor, now)
        state.refresh()
    return json_response({"pod_id": pod["id"], "action": action, "actor": actor, "at": iso(now)})


def _apply_out_of_band(
    state: Any, pod: dict[str, Any], action: str, body: dict[str, Any], actor: dict[str, Any] | None, now: float
) -> None:
    """Make the change and record its event (the caller holds the lock)."""
    if action == "delete_pod":
        state.deletion_start(pod, now, actor)
    elif action == "reboot_pod":
        pod["updated_at"] = now
        state.add_event(pod, "reboot", "Pod rebooted", now, actor=actor)
    else:
        value = body.get("removal_scheduled_at")
        try:
            at = parse_iso(value) if isinstance(value, str) else None
        except ValueError:
            at = None
        if value is not None and at is None:
            raise field_error("removal_scheduled_at", "must be an ISO-8601 date-time or null (cancel)")
        pod.update(removal_scheduled_at=at, updated_at=now)
        kind, text = ("schedule", f"Removal scheduled at {iso(at)}") if at else ("unschedule", "Removal cancelled")
        state.add_event(pod, kind, text, now, actor=actor, detail={"removal_scheduled_at": iso(at)})
