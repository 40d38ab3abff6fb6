"""What a rental's progress section shows, and the polled answer that carries it.

The section is rendered once per (rental, version, may act) and kept in a per-process cache. Every write that
changes what it shows bumps `Rental.version` once the rows it changes are written (in the same transaction or
after it), and a render reads the rental row first: the HTML stored for a version is never older than that
version, no process needs to hear of another's writes, and a new version is simply a new key. The section
holds no session or user data, not even a CSRF field: its forms get the page's token when submitted
(`static/js/csrf.js`; the section only ever arrives through htmx, so scripts run).
"""

from __future__ import annotations

import uuid

from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from common.metrics import POLL_REQUESTS
from rentals import polling
from rentals.launch import cluster_launch
from rentals.models import Rental
from rentals.panels import panels_context
from rentals.states import CUSTOMER_EXPLANATIONS, FINAL_STATES, HOLDS_CLUSTER_STATES
from rentals.states import RentalStatus as S

FRAGMENT_CACHE = "fragments"
NO_CSRF_FIELD = ""  # the template's forms render `{% csrf_token %}` only when there is one


def progress_context(rental: Rental, *, may_act: bool) -> dict[str, object]:
    """Build what the progress section shows (the same for every viewer with the same `may_act`)."""
    all_members = list(rental.members.all())
    members = [member for member in all_members if member.gone_at is None]
    running = sum(1 for member in members if member.status == "RUNNING" and member.ssh_command)
    return {
        "rental": rental,
        "attempts": list(rental.attempts.all()),
        "members": members,
        "launch": cluster_launch(members, gpus_per_node=rental.gpus_per_node),
        "explanation": CUSTOMER_EXPLANATIONS.get(rental.status, ""),
        "poll": rental.status not in FINAL_STATES,
        "steps": _steps(rental, running, has_members=bool(members)),
        "may_act": may_act,
        "holds_cluster": HOLDS_CLUSTER_STATES,
        **panels_context(rental, all_members=all_members, live=members),  # removal, connect, failures
    }


def _steps(rental: Rental, running: int, *, has_members: bool) -> list[dict[str, object]]:
    """Return the stepper: queued → sent → rented → nodes starting k/N → ready."""
    order = [S.QUEUED, S.SENDING, S.RENTED, "starting", S.READY]
    reached_by_status: dict[str, int] = {
        S.QUEUED: 0,
        S.SENDING: 1,
        S.RETRYING: 1,
        S.UNKNOWN: 1,
        S.REFUSED: 1,
        S.FAILED: 1,
        S.NOT_RENTED: 1,
        S.CANCELLED: 0,
        S.RENTED: 3 if has_members else 2,
        S.DEGRADED: 3,
        S.READY: 4,
        S.TERMINATING: 4,
        S.TERMINATED: 4,
    }
    reached = reached_by_status.get(rental.status, 0)
    labels = ["Queued", "Sent", "Rented", f"Nodes starting {running}/{rental.node_count}", "Ready"]
    return [
        {"label": label, "done": index < reached or (index == reached == 4), "current": index == reached}
        for index, (_key, label) in enumerate(zip(order, labels, strict=True))
    ]


def _section_key(public_hex: str, version: int, may_act: bool) -> str:
    # The public id, not the primary key: a key a recreated database reuses can never find another's HTML.
    return f"rental-progress:{public_hex}:{version}:{int(may_act)}"


def _cached_section(public_hex: str, version: int, may_act: bool) -> str | None:
    return caches[FRAGMENT_CACHE].get(_section_key(public_hex, version, may_act))


def _render_section(rental: Rental, *, may_act: bool) -> str:
    """Render the out-of-band progress section of this version of the rental and keep it."""
    context = {**progress_context(rental, may_act=may_act), "oob": True, "csrf_token": NO_CSRF_FIELD}
    html = render_to_string("rentals/rental_detail.html#progress", context)
    caches[FRAGMENT_CACHE].set(_section_key(rental.public_id.hex, rental.version, may_act), html)
    return html


def section_html(rental: Rental, *, may_act: bool) -> str:
    """Return the out-of-band progress section of this version of the rental, rendering it once."""
    cached = _cached_section(rental.public_id.hex, rental.version, may_act)
    return cached if cached is not None else _render_section(rental, may_act=may_act)


def answer_granted_poll(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse | None:
    """Answer a poll whose token stands in for the full check, or return None to take the checked path."""
    query = polling.read_poll_query(request)
    grant = polling.read_grant(request, query)
    if grant is None:
        return None
    state = polling.live_state(grant)
    # The public id in the URL must be the rental the token names.
    if state is None or state.public_hex != public_id.hex:
        return None
    if state.version == query.version and query.interval:
        POLL_REQUESTS.labels(outcome="unchanged").inc()
        return _answer(request, query, token=grant.token, version=state.version, status=state.status)
    version, status = state.version, state.status
    html = _cached_section(state.public_hex, version, grant.may_act)
    if html is None:
        rental = Rental.objects.filter(pk=grant.rental_id).first()
        if rental is None:
            return None
        # The row may be newer than the state just read: show (and key) what was rendered.
        version, status, html = rental.version, rental.status, _render_section(rental, may_act=grant.may_act)
    POLL_REQUESTS.labels(outcome="changed").inc()
    return _answer(request, query, token=grant.token, version=version, status=status, section=html)


def answer_checked_poll(request: HttpRequest, rental: Rental, *, may_act: bool) -> HttpResponse:
    """Answer a poll after the full session, user and permission check, with a new token."""
    query = polling.read_poll_query(request)
    token = polling.poll_token(request=request, rental_id=rental.pk, may_act=may_act)
    unchanged = rental.version == query.version and query.interval
    POLL_REQUESTS.labels(outcome="checked").inc()
    return _answer(
        request,
        query,
        token=token,
        version=rental.version,
        status=rental.status,
        section=None if unchanged else section_html(rental, may_act=may_act),
    )


def _answer(
    request: HttpRequest, query: polling.PollQuery, *, token: str, version: int, status: str, section: str | None = None
) -> HttpResponse:
    """The poller (fast after a change, slower while unchanged), then the section when there is one."""
    delay = polling.next_interval(status=status, version=version, seen_version=query.version, interval=query.interval)
    html = polling.poller_html(url=request.path, version=version, status=status, interval=delay, token=token)
    return HttpResponse(html if section is None else html + section)
