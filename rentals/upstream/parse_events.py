"""Read the account's events (`GET /users/me/events`) and Lium's cluster switch (`GET /v1/shared-config`).

Checked like every answer (`rentals.upstream.parse`): a row without a usable time or pod id is skipped, not guessed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rentals.upstream.parse import (
    POD_ID_MAX,
    POD_NAME_MAX,
    SHORT_TEXT_MAX,
    ident,
    json_list,
    json_object,
    text,
    timestamp,
)

EVENT_TYPE_MAX = 64


def cluster_switch(body: Any) -> bool | None:
    """Return `multinode_clusters_enabled` as the shared config says it: True, False, or None when absent or not a
    boolean (lium-core would default it off, but only an explicit false blocks renting here)."""
    value = json_object(body, "The shared config").get("multinode_clusters_enabled")
    return value if isinstance(value, bool) else None


@dataclass(frozen=True)
class AccountEvent:
    """One row of the account's event log: what happened to which pod, when, and who did it (None: the platform)."""

    created_at: datetime
    event_type: str
    sub_event_type: str
    pod_id: str
    pod_name: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    actor: dict[str, str] | None = None
    digest: str = ""  # the row's fingerprint: the log has no id, so a follower drops what it saw by this

    def as_dict(self) -> dict[str, Any]:
        """Return the event as stored (JSON)."""
        return {
            "created_at": self.created_at.isoformat(),
            "event_type": self.event_type,
            "sub_event_type": self.sub_event_type,
            "pod_id": self.pod_id,
            "pod_name": self.pod_name,
            "detail": self.detail,
            "error": self.error,
            "actor": self.actor,
        }


def account_event_listing(body: Any) -> list[AccountEvent]:
    """Read the account's events (newest first upstream), oldest first; unusable rows are skipped."""
    events = []
    for raw in json_list(body, "The account's events"):
        event = _account_event(json_object(raw, "An account event"))
        if event is not None:
            events.append(event)
    return sorted(events, key=lambda event: event.created_at)


def _account_event(raw: dict[str, Any]) -> AccountEvent | None:
    at = timestamp(raw.get("created_at"))
    pod_id = ident(raw.get("pod_id"), POD_ID_MAX)
    event_type = ident(raw.get("event_type"), EVENT_TYPE_MAX)
    if at is None or pod_id is None or event_type is None:
        return None
    detail = raw["detail"] if isinstance(raw.get("detail"), dict) else {}
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return AccountEvent(
        created_at=at,
        event_type=event_type,
        sub_event_type=ident(raw.get("sub_event_type"), EVENT_TYPE_MAX) or event_type,
        pod_id=pod_id,
        pod_name=ident(raw.get("pod_name"), POD_NAME_MAX) or "",
        detail={str(k)[:64]: _short(v) for k, v in list(detail.items())[:20]},
        error=text(raw.get("error") or "", SHORT_TEXT_MAX * 5) if isinstance(raw.get("error"), str) else "",
        actor=_actor(raw.get("actor")),
        digest=digest,
    )


def _short(value: Any) -> Any:
    """Keep a detail value if it is a plain scalar (text cut), else its text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    return text(value if isinstance(value, str) else json.dumps(value, default=str), SHORT_TEXT_MAX)


def _actor(raw: Any) -> dict[str, str] | None:
    """Return `{auth, api_key_id, api_key_name}` (empty strings for what is missing), None for the platform."""
    if not isinstance(raw, dict):
        return None
    return {key: ident(raw.get(key), SHORT_TEXT_MAX) or "" for key in ("auth", "api_key_id", "api_key_name")}
