"""Slack as a webhook flavour: an endpoint of kind `slack` is a Slack incoming-webhook URL, and gets the same events
as a Slack message (`{"text": …}`, mrkdwn, with a link to the rental's page) instead of the event's JSON.

The message is made from the event's stored body at each attempt, so every retry sends the same bytes; delivery,
retries and the delivery log are the outbox's own (`notifications.delivery`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

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
    elif isinstance(rental, dict):
        link = settings.SITE_URL.rstrip("/") + reverse("rentals:rental_detail", args=[rental["id"]])
        customer = (rental.get("customer") or {}).get("name", "")
        text = f"*{_escaped(title)}*: <{link}|{_escaped(rental.get('pod_name', rental['id']))}>"
        text += f" ({_escaped(customer)}), now {_escaped(rental.get('status', ''))}."
    elif event_type == ev.BUDGET_THRESHOLD:
        who, month = _escaped(data.get("customer_ref") or "your team"), _escaped(data.get("month"))
        spent, budget = _escaped(data.get("spent_usd")), _escaped(data.get("budget_usd"))
        text = f"*{_escaped(title)}*: {who} spent ${spent} of ${budget} in {month}"
        text += f" ({_escaped(data.get('threshold_pct'))} %)."
    else:
        text = f"*{_escaped(title)}* (event {_escaped(payload.get('id', ''))})."
    return json.dumps({"text": text}, separators=(",", ":"))
