"""Open the rent form filled in: from a preset, "Rent again" or a capacity watch's link.

A caller (another app) stores the form's initial values in the session under a short token and links to the rent
form with `prefill=<token>`; a plain `nodes=a,b` preselects nodes (the link in a `capacity.available` e-mail,
which may be opened in another browser). The rent view reads both; the order is checked as any other.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from rentals.orders.order import OPTIONS
from rentals.upstream.parse_offers import Fabric

SESSION_KEY = "rent_prefill"
KEPT = 5  # the latest prefills a session keeps (a few tabs opened from presets)
# The rent form's fields a prefill may set: the order's options and these.
FIELDS = {"executor_ids", "pod_name", "template_id", "verify_fabric", "ssh_public_keys", "preset_id", "note", *OPTIONS}


def rent_prefill_url(request: HttpRequest, *, customer_id: int, fabric_id: str, initial: dict[str, Any]) -> str:
    """Keep `initial` (the rent form's fields in FIELDS) in the session; return the rent form's URL that uses it."""
    token = secrets.token_urlsafe(8)
    kept = dict(list(request.session.get(SESSION_KEY, {}).items())[-(KEPT - 1) :])
    kept[token] = {name: value for name, value in initial.items() if name in FIELDS}
    request.session[SESSION_KEY] = kept
    query = urlencode({"fabric": fabric_id, "customer": customer_id, "prefill": token})
    return f"{reverse('rentals:rent')}?{query}"


def rent_nodes_url(*, customer_id: int, fabric_id: str, executor_ids: list[str]) -> str:
    """Return the rent form's path with these nodes preselected (no session needed)."""
    query = urlencode({"fabric": fabric_id, "customer": customer_id, "nodes": ",".join(executor_ids)})
    return f"{reverse('rentals:rent')}?{query}"


def rent_prefill_initial(request: HttpRequest, fabric: Fabric) -> dict[str, Any]:
    """Return the rent form's initial values the URL asks for (`prefill` token, `nodes`); only this fabric's nodes."""
    initial: dict[str, Any] = dict(request.session.get(SESSION_KEY, {}).get(request.GET.get("prefill", ""), {}))
    nodes = request.GET.get("nodes", "")
    if nodes:
        initial["executor_ids"] = nodes.split(",")[:1000]
    if "executor_ids" in initial:
        free = {node.id for node in fabric.nodes}
        initial["executor_ids"] = [node_id for node_id in initial["executor_ids"] if node_id in free]
    if initial.get("ssh_public_keys"):
        initial["saved_keys"] = []  # the preset's keys, not every saved one
    return initial
