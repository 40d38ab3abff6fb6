"""The one signed-webhook sender, for customers' endpoints and the operators' alerts alike.

A POST signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`), sent only to an
address `addresses.url_check` accepted, connected to that very address (the name is never resolved a second
time: DNS rebinding), with a connect timeout and a total deadline, no redirects, no proxy from the
environment, and at most WEBHOOK_MAX_RESPONSE_BYTES of the answer read. Retrying is the caller's: the outbox
backs off per delivery, the runway check tries an alert again on its next run; `Outcome.final` says no retry helps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
from django.conf import settings
from standardwebhooks.webhooks import Webhook

from notifications.addresses import UnsafeUrl, url_check

EXCERPT_CHARS = 500
USER_AGENT = "lium-clusters-webhooks/1"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None = None
    duration_ms: int = 0
    response: str = ""
    error: str = ""
    # No retry can help (the body is over the cap, the secret is malformed): give up now.
    final: bool = False


def signed_post(*, url: str, secret: str, msg_id: str, body: str) -> Outcome:
    """Check `url`, sign `body` as message `msg_id` with the `whsec_` secret, POST it; return what happened."""
    data = body.encode()
    if len(data) > settings.WEBHOOK_MAX_BODY_BYTES:
        return Outcome(
            ok=False,
            error=f"The event is {len(data)} bytes, over the {settings.WEBHOOK_MAX_BODY_BYTES} cap.",
            final=True,
        )
    try:
        target = url_check(url)
    except UnsafeUrl as exc:
        return Outcome(ok=False, error=f"Not sent: {exc}")
    sent_at = datetime.now(UTC)
    try:
        signature = Webhook(secret).sign(msg_id, sent_at, body)
    except Exception as exc:  # a malformed secret: say so, never show it
        return Outcome(
            ok=False, error=f"Not sent: the signing secret is not a valid whsec_ secret ({type(exc).__name__})."
        )
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }
    request_url = httpx.URL(target.url)
    extensions: dict[str, object] = {}
    if target.address is not None:
        # Connect to the address that was checked, not to whatever the name resolves to a moment later.
        headers["host"] = request_url.netloc.decode()
        extensions["sni_hostname"] = target.host
        request_url = request_url.copy_with(host=target.address)
    return _post(request_url, data, headers, extensions)


def _post(url: httpx.URL, body: bytes, headers: dict[str, str], extensions: dict[str, object]) -> Outcome:
    total = settings.WEBHOOK_TIMEOUT_SECONDS
    timeout = httpx.Timeout(total, connect=min(settings.WEBHOOK_CONNECT_TIMEOUT_SECONDS, total))
    started = time.monotonic()
    deadline = started + total
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client,
            client.stream("POST", url, content=body, headers=headers, extensions=extensions) as response,
        ):
            received = bytearray()
            for chunk in response.iter_raw():
                received += chunk
                if len(received) >= settings.WEBHOOK_MAX_RESPONSE_BYTES or time.monotonic() > deadline:
                    break
            status = response.status_code
    except httpx.HTTPError as exc:
        return Outcome(ok=False, duration_ms=ms_since(started), error=f"{type(exc).__name__}: {exc}"[:EXCERPT_CHARS])
    excerpt = bytes(received[: EXCERPT_CHARS * 4]).decode(errors="replace")[:EXCERPT_CHARS]
    ok = 200 <= status < 300
    error = "" if ok else (f"Redirects are not followed (status {status})." if 300 <= status < 400 else "")
    return Outcome(ok=ok, status_code=status, duration_ms=ms_since(started), response=excerpt, error=error)


def ms_since(started: float) -> int:
    """Return the milliseconds since a `time.monotonic()` reading."""
    return int((time.monotonic() - started) * 1000)
