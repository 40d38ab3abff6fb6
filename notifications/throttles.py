"""How often a person may make the dashboard POST on demand (test sends, redeliveries).

Every such send goes to a URL a member chose and its answer is shown back, so without a limit the dashboard is
anyone's HTTP client. Three limits, in the shared cache (`common.ratelimit`): a person's over all endpoints, a
person's at one endpoint, and the endpoint's over everyone. Only sends made count: a refused try gives back
what it counted, and one person alone cannot use up the endpoint's budget, so nobody can stop an admin testing.
"""

from __future__ import annotations

from django.conf import settings

from common import ratelimit


def manual_send_retry_after(*, user_id: int, endpoint_id: int) -> int | None:
    """Count one manual send if every limit allows it; return None when allowed, else the seconds to wait."""
    return ratelimit.take_all(
        [
            ("webhook-send-user", str(user_id), settings.WEBHOOK_TEST_SENDS_PER_USER_PER_MINUTE),
            (
                "webhook-send-user-endpoint",
                f"{user_id}:{endpoint_id}",
                settings.WEBHOOK_TEST_SENDS_PER_USER_ENDPOINT_PER_MINUTE,
            ),
            ("webhook-send-endpoint", str(endpoint_id), settings.WEBHOOK_TEST_SENDS_PER_ENDPOINT_PER_MINUTE),
        ]
    )


def throttled_message(wait: int) -> str:
    """Return what the page and the API say when a manual send is refused."""
    return f"Too many test sends or redeliveries in a minute; wait {wait} s and try again."
