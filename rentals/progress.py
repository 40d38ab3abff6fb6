"""A rental page's live progress: `progress_context` builds the page's section and poller, `answer_poll` answers it.

An unchanged rental gets only a new, slower poller; a changed one also gets the section, swapped out of band.
The section is rendered once per (rental, version, may act) and kept per process, because every write that
changes what it shows bumps `Rental.version`. One thing changes it with no write: a `rented` rental's nodes
becoming overdue (`rentals.explanations`). Such a section says when (`Section.changes_at`, carried by the poller
as `d`): after that it is rendered again, and a poll of an unchanged version still gets it. It holds no CSRF
field, so every viewer of a version shares it; the page keeps its token outside the section (`rental_detail.html`).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from django.contrib.auth.views import redirect_to_login
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.template.loader import get_template, render_to_string
from django.utils import timezone
from django.utils.html import escape

from common.metrics import POLL_REQUESTS
from rentals import polling
from rentals.explanations import rental_explanation
from rentals.launch import cluster_launch
from rentals.models import Rental
from rentals.panels import panels_context
from rentals.selectors import members_due_at
from rentals.states import FINAL_STATES, HOLDS_CLUSTER_STATES, IN_FLIGHT_STATES, RentalStatus

POLL_FAST_SECONDS = 2.0
POLL_SLOW_SECONDS = 15.0
POLL_MAX_SECONDS = 30.0
FRAGMENT_CACHE = "fragments"
POLLER_PARTIAL = "rentals/rental_detail.html#poller"
# Markers for the poller partial's two slots (text that escaping leaves as it is).
_URL_SLOT, _DELAY_SLOT = "POLLER-URL-SLOT", "POLLER-DELAY-SLOT"
SECTION_PARTIAL = "rentals/rental_detail.html#progress"

STEP_LABELS = ["Queued", "Sent", "Rented", "Nodes starting {running}/{nodes}", "Ready"]
# The step each status has reached (an index into STEP_LABELS).
STEP_REACHED: dict[str, int] = {
    RentalStatus.QUEUED: 0,
    RentalStatus.CANCELLED: 0,
    RentalStatus.SENDING: 1,
    RentalStatus.RETRYING: 1,
    RentalStatus.UNKNOWN: 1,
    RentalStatus.REFUSED: 1,
    RentalStatus.FAILED: 1,
    RentalStatus.NOT_RENTED: 1,
    RentalStatus.RENTED: 2,  # 3 once it has members
    RentalStatus.DEGRADED: 3,
    RentalStatus.READY: 4,
    RentalStatus.TERMINATING: 4,
    RentalStatus.TERMINATED: 4,
}

# The full check of a poll without a valid token: the rental as this user may see it, and whether they may act.
Check = Callable[[], tuple[Rental, bool]]


@dataclass(frozen=True)
class PollQuery:
    """What a poll asks: the version its page shows, its current interval, its token, and when its section may
    change by time alone (0, 0, "", 0 if absent)."""

    version: int
    interval: float
    token: str
    due: int = 0

    def is_due(self) -> bool:
        """Whether the section the page shows may have changed by time alone."""
        return bool(self.due) and timezone.now().timestamp() >= self.due


@dataclass(frozen=True)
class Section:
    """A rendered progress section, and when it may change by time alone (epoch seconds; 0: only by a write)."""

    html: str
    changes_at: int


def progress_context(request: HttpRequest, rental: Rental, *, may_act: bool, poll_url: str) -> dict[str, object]:
    """Build what the rental page's progress section and poller show, with a new poll token."""
    token = polling.poll_token(request=request, rental_id=rental.pk, may_act=may_act)
    interval = next_interval(status=rental.status, version=rental.version, seen_version=0, interval=0)
    section, changes_at = _section_context(rental, may_act=may_act)
    poller = _poller_context(
        url=poll_url, version=rental.version, status=rental.status, interval=interval, token=token, due=changes_at
    )
    return {**section, **poller}


def answer_poll(request: HttpRequest, public_id: uuid.UUID, *, check: Check) -> HttpResponse:
    """Answer the page's poll: a new poller, and the progress section when the rental changed.

    A valid token stands in for the full check. Without one, a logged-out browser is sent to log in; any
    other poll runs `check` (which raises when the user may not see the rental) and gets a new token.
    """
    query = _read_poll_query(request)
    answer = _answer_granted(request, query, public_id)
    if answer is not None:
        return answer
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    rental, may_act = check()
    token = polling.poll_token(request=request, rental_id=rental.pk, may_act=may_act)
    unchanged = rental.version == query.version and query.interval and not query.is_due()
    POLL_REQUESTS.labels(outcome="checked").inc()
    section = None if unchanged else _section(rental, may_act=may_act)
    return _answer(request, query, token=token, version=rental.version, status=rental.status, section=section)


def section_html(rental: Rental, *, may_act: bool) -> str:
    """Return the out-of-band progress section of this version of the rental, rendering it once."""
    return _section(rental, may_act=may_act).html


def _section(rental: Rental, *, may_act: bool) -> Section:
    cached = _cached_section(rental.public_id.hex, rental.version, may_act)
    return cached if cached is not None else _render_section(rental, may_act=may_act)


def next_interval(*, status: str, version: int, seen_version: int, interval: float) -> float:
    """Poll fast while in flight, slowly otherwise, and back off by 1.5 times (up to 30 s) while unchanged."""
    base = POLL_FAST_SECONDS if status in IN_FLIGHT_STATES else POLL_SLOW_SECONDS
    if seen_version == version and interval:
        return min(max(interval * 1.5, base), POLL_MAX_SECONDS)
    return base


def _answer_granted(request: HttpRequest, query: PollQuery, public_id: uuid.UUID) -> HttpResponse | None:
    """Answer with the token standing in for the check, or return None when it cannot."""
    grant = polling.read_grant(request, query.token)
    state = polling.live_state(grant) if grant is not None else None
    # The rental in the URL must be the one the token names.
    if grant is None or state is None or state.public_hex != public_id.hex:
        return None
    if state.version == query.version and query.interval and not query.is_due():
        POLL_REQUESTS.labels(outcome="unchanged").inc()
        return _answer(request, query, token=grant.token, version=state.version, status=state.status)
    version, status = state.version, state.status
    section = _cached_section(state.public_hex, version, grant.may_act)
    if section is None:
        rental = Rental.objects.filter(pk=grant.rental_id).first()
        if rental is None:
            return None
        # The row may be newer than the state just read: show (and key) what was rendered.
        version, status, section = rental.version, rental.status, _render_section(rental, may_act=grant.may_act)
    POLL_REQUESTS.labels(outcome="changed").inc()
    return _answer(request, query, token=grant.token, version=version, status=status, section=section)


def _answer(
    request: HttpRequest, query: PollQuery, *, token: str, version: int, status: str, section: Section | None = None
) -> HttpResponse:
    """Return the next poller (fast after a change, slower while unchanged), then the section if there is one."""
    delay = next_interval(status=status, version=version, seen_version=query.version, interval=query.interval)
    due = query.due if section is None else section.changes_at  # what the page shows after this answer
    context = _poller_context(url=request.path, version=version, status=status, interval=delay, token=token, due=due)
    html = _poller_html(context)
    return HttpResponse(html if section is None else html + section.html)


def _poller_html(context: dict[str, str]) -> str:
    """Render the poller partial for a poll's answer, as the page's template would.

    The partial is rendered once per process with markers in its two slots; each poll fills in the escaped
    values. Rendering it through the template engine on every poll cost the bench's poll ratio 0.04-0.06
    (bench/README.md, "A quiet machine"). The page itself renders the partial normally.
    """
    if not context:
        return _poller_skeleton()[0]
    head, middle, tail = _poller_skeleton()[1:]
    return f"{head}{escape(context['poller_url'])}{middle}{escape(context['poller_delay'])}{tail}"


@functools.cache
def _poller_skeleton() -> tuple[str, str, str, str]:
    """Return the final poller, then the live poller split around its URL and delay slots."""
    template = get_template(POLLER_PARTIAL)
    live = template.render({"poller_url": _URL_SLOT, "poller_delay": _DELAY_SLOT})
    head, rest = live.split(_URL_SLOT)
    middle, tail = rest.split(_DELAY_SLOT)
    return template.render({}), head, middle, tail


def _poller_context(
    *, url: str, version: int, status: str, interval: float, token: str, due: int = 0
) -> dict[str, str]:
    """What the poller partial needs: the URL it asks next and after how long (neither once the rental is final)."""
    if status in FINAL_STATES:
        return {}
    # Two variables, not six: each one the template renders costs a few µs on every poll.
    url = f"{url}?v={int(version)}&i={float(interval)}&t={token}" + (f"&d={int(due)}" if due else "")
    return {"poller_url": url, "poller_delay": str(float(interval))}


def _read_poll_query(request: HttpRequest) -> PollQuery:
    """Read the poll's four parameters from the raw query string (half the cost of building `request.GET`)."""
    try:
        params = dict(parse_qsl(request.META.get("QUERY_STRING", ""), max_num_fields=10))
    except ValueError:
        params = {}
    try:
        version, interval, due = int(params.get("v", "0")), float(params.get("i", "0")), int(params.get("d", "0"))
    except ValueError:
        version, interval, due = 0, 0.0, 0
    # min() first: a NaN interval compares false both ways and becomes 0.
    interval = max(0.0, min(interval, POLL_MAX_SECONDS))
    return PollQuery(version=version, interval=interval, token=params.get("t", ""), due=due)


def _section_context(rental: Rental, *, may_act: bool) -> tuple[dict[str, object], int]:
    """Build what the progress section shows (the same for every viewer with the same `may_act`), and when time
    alone may change it (epoch seconds, or 0)."""
    all_members = list(rental.members.all())
    members = [member for member in all_members if member.gone_at is None]
    running = sum(1 for member in members if member.status == "RUNNING" and member.ssh_command)
    now = timezone.now()
    # Rendered before the nodes are due, the explanation changes when they are: render it again then.
    due = members_due_at(rental) if not all_members else None
    changes_at = int(due.timestamp()) + 1 if due is not None and due >= now else 0
    context: dict[str, object] = {
        "rental": rental,
        "attempts": list(rental.attempts.all()),
        "members": members,
        "launch": cluster_launch(members, gpus_per_node=rental.gpus_per_node),
        "explanation": rental_explanation(rental, now=now),
        "poll": rental.status not in FINAL_STATES,
        "steps": _steps(rental, running, has_members=bool(members)),
        "may_act": may_act,
        "holds_cluster": HOLDS_CLUSTER_STATES,
        **panels_context(rental, all_members=all_members, live=members),  # removal, connect, failures
    }
    return context, changes_at


def _steps(rental: Rental, running: int, *, has_members: bool) -> list[dict[str, object]]:
    """Return the stepper: queued → sent → rented → nodes starting k/N → ready."""
    reached = 3 if rental.status == RentalStatus.RENTED and has_members else STEP_REACHED.get(rental.status, 0)
    labels = [label.format(running=running, nodes=rental.node_count) for label in STEP_LABELS]
    return [
        {"label": label, "done": index < reached or (index == reached == 4), "current": index == reached}
        for index, label in enumerate(labels)
    ]


def _section_key(public_hex: str, version: int, may_act: bool) -> str:
    # The public id, not the primary key: a key a recreated database reuses can never find another's HTML.
    return f"rental-progress:{public_hex}:{version}:{int(may_act)}"


def _cached_section(public_hex: str, version: int, may_act: bool) -> Section | None:
    """Return the kept section of this version, unless time alone may have changed it since it was rendered."""
    kept = caches[FRAGMENT_CACHE].get(_section_key(public_hex, version, may_act))
    if kept is None:
        return None
    section = Section(*kept)
    return None if section.changes_at and timezone.now().timestamp() >= section.changes_at else section


def _render_section(rental: Rental, *, may_act: bool) -> Section:
    """Render the out-of-band progress section of this version of the rental and keep it."""
    context, changes_at = _section_context(rental, may_act=may_act)
    section = Section(render_to_string(SECTION_PARTIAL, {**context, "oob": True}), changes_at)
    key = _section_key(rental.public_id.hex, rental.version, may_act)
    caches[FRAGMENT_CACHE].set(key, (section.html, section.changes_at))
    return section
