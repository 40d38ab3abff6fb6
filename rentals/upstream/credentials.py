"""Checks on upstream credentials: does this one reach Lium, and what does its backend promise?"""

from __future__ import annotations

from dataclasses import dataclass

from accounts.models import UpstreamCredential
from rentals import upstream


@dataclass(frozen=True)
class ConnectionReport:
    ok: bool
    message: str


def credential_test_connection(*, credential: UpstreamCredential) -> ConnectionReport:
    """Call `GET /version` and `GET /users/me` with the credential and say what they answered.

    An answer that does not parse is a failed test (`MalformedAnswer`), never a connected credential.
    """
    try:
        client = upstream.client_for(credential)
        version = client.version()
        me = client.me()
    except ValueError as exc:
        return ConnectionReport(False, f"{credential.name}: {exc}")
    except upstream.UpstreamError as exc:
        request_id = f" (request id {exc.request_id})" if exc.request_id else ""
        return ConnectionReport(False, f"{credential.name}: {exc.message}{request_id}")
    balance = f"${me.balance:.2f}" if me.balance is not None else "not given"
    return ConnectionReport(
        True,
        f"{credential.name}: connected to {credential.effective_base_url}; balance {balance}; "
        + (
            "retries are safe (rent_idempotency)."
            if "rent_idempotency" in version
            else "WARNING: no rent_idempotency feature."
        ),
    )
