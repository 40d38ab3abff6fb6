"""Slack as a webhook flavour: an endpoint of kind `slack` is a Slack incoming-webhook URL, and gets the same events
as a Slack message (`{"text": …}`, mrkdwn, with a link: the rental's page; a watch's rent form on the nodes it
found; the usage page for a budget threshold) instead of the event's JSON.

The message is made from the event's stored body at each attempt, so every retry sends the same bytes; delivery,
retries and the delivery log are the outbox's own (`notifications.delivery`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.urls import reverse

from notifications import events as ev

SLACK_HOST = "hooks.slack.com"


def kind_for_url(url: str) -> str:
    """Return the kind an endpoint of this URL is when none is given: `slack` for Slack's webhook host."""
    host = (urlsplit(url).hostname or "").lower()
    return "slack" if host == SLACK_HOST else "standard"


def url_shown(url: str) -> str:
    """Return a Slack URL without its last path segment (the token that lets anyone post to the channel)."""
    head, _sep, tail = url.rpartition("/")
    return f"{head}/…" if tail and head.count("/") >= 3 else url


def _escaped(text: Any) -> str:
    # Slack's mrkdwn reads &, < and > as markup: a pod name must never become a link or a mention.
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(*, event_type: str, body: str) -> str:
    """Return the Slack message (JSON) for an event's stored body."""
    payload = json.loads(body)
    data = payload.get("data") or {}
    title = ev.EVENT_TYPES.get(event_type, event_type)
    rental = data.get("rental")
    if event_type == ev.WEBHOOK_TEST:
        text = "Test event from the Lium clusters dashboard: this Slack webhook works."
    elif event_type == ev.CAPACITY_AVAILABLE:
        # What the watch found, and the rental it placed (auto-rent) or the rent form on the nodes found.
        text = f"*{_escaped(title)}*: {_escaped(data.get('message', ''))} "
        if isinstance(rental, dict):
            text += _rental_link(rental)
        else:
            text += f"<{_escaped(data.get('rent_url', ''))}|Open the rent form on them>"
    elif isinstance(rental, dict):
        customer = (rental.get("customer") or {}).get("name", "")
        text = f"*{_escaped(title)}*: {_rental_link(rental)}"
        text += f" ({_escaped(customer)}), now {_escaped(rental.get('status', ''))}."
    elif event_type == ev.BUDGET_THRESHOLD:
        who, month = _escaped(data.get("customer_ref") or "your team"), _escaped(data.get("month"))
        spent, budget = _escaped(data.get("spent_usd")), _escaped(data.get("budget_usd"))
        usage = settings.SITE_URL.rstrip("/") + reverse("billing:usage") + "?" + urlencode({"month": data.get("month")})
        text = f"*{_escaped(title)}*: {who} spent ${spent} of ${budget} in {month}"
        text += f" ({_escaped(data.get('threshold_pct'))} %). <{_escaped(usage)}|Usage>"
    else:
        text = f"*{_escaped(title)}* (event {_escaped(payload.get('id', ''))})."
    return json.dumps({"text": text}, separators=(",", ":"))


def _rental_link(rental: dict[str, Any]) -> str:
    """A Slack link to the rental's page, named by its pod."""
    link = settings.SITE_URL.rstrip("/") + reverse("rentals:rental_detail", args=[rental["id"]])
    return f"<{link}|{_escaped(rental.get('pod_name', rental['id']))}>"
