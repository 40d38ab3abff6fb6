"""How often a person may make the dashboard POST on demand (test sends, redeliveries): per user and per endpoint.

Every such send goes to a URL a member chose and its answer is shown back, so without a limit the dashboard is
anyone's HTTP client. Both limits count every try, refused ones too, in the shared cache (`common.ratelimit`).
"""

from __future__ import annotations

from django.conf import settings

from common import ratelimit


def manual_send_retry_after(*, user_id: int, endpoint_id: int) -> int | None:
    """Count one manual send; return None when allowed, else the seconds to wait."""
    waits = [
        ratelimit.hit(
            scope="webhook-send-user", key=str(user_id), limit=settings.WEBHOOK_TEST_SENDS_PER_USER_PER_MINUTE
        ),
        ratelimit.hit(
            scope="webhook-send-endpoint",
            key=str(endpoint_id),
            limit=settings.WEBHOOK_TEST_SENDS_PER_ENDPOINT_PER_MINUTE,
        ),
    ]
    refused = [wait for wait in waits if wait is not None]
    return max(refused) if refused else None


def throttled_message(wait: int) -> str:
    """Return what the page and the API say when a manual send is refused."""
    return f"Too many test sends or redeliveries in a minute; wait {wait} s and try again."
