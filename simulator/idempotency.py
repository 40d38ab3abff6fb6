"""Per-account Idempotency-Key records for the cluster rent route (seed semantics)."""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .state import State


def claim(state: State, account_id: str, key: str, body_sha: str) -> dict[str, Any] | None:
    """Look the key up: return a stored answer to replay, None after claiming it, or raise a 409/422."""
    now = state.clock.now()
    ttl = state.config["idempotency_ttl_seconds"]
    with state.lock:
        rec = state.idempotency.get((account_id, key))
        if rec is not None and rec["state"] == "unknown":
            # An answer that was never recorded may hide a rent: refuse forever, whatever the body.
            raise ApiError(
                409,
                "idempotency_outcome_unknown",
                "The first request with this Idempotency-Key may have rented, but its outcome was not recorded",
                hint="Look for the cluster in GET /pods; do not rent again with a new key blindly.",
            )
        if rec is not None and rec["state"] == "done" and now - rec["created_at"] >= ttl:
            rec = None  # past the retention window the key starts a new rent
        if rec is not None:
            if rec["body_sha256"] != body_sha:
                raise ApiError(
                    422,
                    "idempotency_key_reused",
                    "This Idempotency-Key was used with a different request body",
                    hint="Send the byte-identical body, or use a new key for a new order.",
                )
            if rec["state"] == "in_progress":
                raise ApiError(
                    409,
                    "idempotency_in_progress",
                    "A request with this Idempotency-Key is still being processed",
                    hint="Retry later with the same key and body.",
                )
            return rec
        state.idempotency[(account_id, key)] = {
            "state": "in_progress",
            "body_sha256": body_sha,
            "created_at": now,
        }
        return None


def store(state: State, account_id: str, key: str, status: int, body: bytes) -> None:
    """Record the answer so a byte-identical repeat replays it."""
    with state.lock:
        rec = state.idempotency.get((account_id, key))
        if rec is not None:
            rec.update(state="done", status=status, body=body)


def mark_unknown(state: State, account_id: str, key: str) -> None:
    """Record that the outcome is unknown; later repeats get 409 forever."""
    with state.lock:
        rec = state.idempotency.get((account_id, key))
        if rec is not None:
            rec.update(state="unknown")


def release(state: State, account_id: str, key: str) -> None:
    """Forget a claim whose request did nothing, so the key can be used again."""
    with state.lock:
        state.idempotency.pop((account_id, key), None)
