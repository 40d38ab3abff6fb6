"""The account's event log as `GET /users/me/events` serves it: one row per pod event, with who caused it.

Rows have the fields lium-io's `lium audit` reads (docs/upstream-api.md §17) and, like the real route, no id.
"""

from __future__ import annotations

from typing import Any

from .clock import iso

# Our internal event type -> (event_type, sub_event_type) as the account's event log names them.
KINDS: dict[str, tuple[str, str]] = {
    "created": ("pod-create", "pod-create.started"),
    "running": ("pod-lifecycle", "pod-lifecycle.status"),
    "creation_failed": ("pod-create", "pod-create.failed"),
    "deleting": ("pod-delete", "pod-delete.started"),
    "removal": ("pod-delete", "pod-delete.started"),
    "removed": ("pod-delete", "pod-delete.success"),
    "reboot": ("pod-reboot", "pod-reboot.success"),
    "schedule": ("pod-removal-schedule", "pod-removal-schedule.set"),
    "unschedule": ("pod-removal-schedule", "pod-removal-schedule.cancelled"),
}


def actor_of(cred: dict[str, Any]) -> dict[str, Any]:
    """Return the `actor` of a change a credential made: its API key, or a session for a bearer token."""
    if cred["id"] is None:
        return {"auth": "session", "api_key_id": None, "api_key_name": None}
    return {"auth": "api_key", "api_key_id": cred["id"], "api_key_name": cred["name"]}


def record(
    state: Any,
    pod: dict[str, Any],
    kind: str,
    message: str,
    at: float,
    actor: dict[str, Any] | None,
    detail: dict[str, Any] | None,
) -> None:
    """Append one row to the pod's account's event log (the caller holds the lock)."""
    event_type, sub_event_type = KINDS.get(kind, ("pod-event", f"pod-event.{kind}"))
    failed = kind == "creation_failed"
    full_detail = {"message": message, **(detail or {})}
    if kind == "running":
        full_detail.setdefault("to_status", "RUNNING")
    state.activity[pod["account_id"]].append(
        {
            "created_at": iso(at),
            "event_type": event_type,
            "sub_event_type": sub_event_type,
            "detail": full_detail,
            "error": message if failed else None,
            "pod_id": pod["id"],
            "pod_name": pod["pod_name"],
            "actor": actor,
            "_api_key_id": pod["api_key_id"],  # for a key that sees only its own pods; never shown
        }
    )
