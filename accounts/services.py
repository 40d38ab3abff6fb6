"""Writes and checks on accounts: testing an upstream credential."""

from __future__ import annotations

from dataclasses import dataclass

from accounts.models import UpstreamCredential


@dataclass(frozen=True)
class ConnectionReport:
    ok: bool
    message: str


def credential_test_connection(*, credential: UpstreamCredential) -> ConnectionReport:
    """Call `GET /version` and `GET /users/me` with the credential and say what they answered."""
    from rentals import upstream

    try:
        client = upstream.client_for(credential)
        version = client.version()
        me = client.me()
    except ValueError as exc:
        return ConnectionReport(False, f"{credential.name}: {exc}")
    except upstream.UpstreamError as exc:
        request_id = f" (request id {exc.request_id})" if exc.request_id else ""
        return ConnectionReport(False, f"{credential.name}: {exc.message}{request_id}")
    features = version.get("features") if isinstance(version, dict) else None
    idempotent = isinstance(features, list) and "rent_idempotency" in features
    balance = me.get("balance") if isinstance(me, dict) else None
    return ConnectionReport(
        True,
        f"{credential.name}: connected to {credential.effective_base_url}; balance ${balance}; "
        + ("retries are safe (rent_idempotency)." if idempotent else "WARNING: no rent_idempotency feature."),
    )
