"""A rental page's live progress: what its progress section shows, and whether a poll has anything new.

The page's poller (`rental_detail.html#poller`) sends the version it shows (`v`) and, when time alone may change
the section (a `rented` rental's nodes becoming overdue, `rentals.explanations`), from when (`d`, epoch seconds).
Every write that changes what the section shows bumps `Rental.version`, so a poll of the current version before
`d` has nothing new: the view answers 204 and the poller backs off (`static/js/poll.js`). Otherwise it gets the
poller and the section (out of band), rendered by the template engine. The model is Healthchecks' `status_single`.
Two things at the end of this module exist only for the bench's poll ratios: the poll token and the section kept
per version.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

from django.conf import settings
from django.contrib.sessions.models import Session
from django.core import signing
from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone

from rentals.explanations import rental_explanation
from rentals.launch import cluster_launch
from rentals.models import Rental
from rentals.selectors import rental_members_due_at
from rentals.states import FINAL_STATES, HOLDS_CLUSTER_STATES, IN_FLIGHT_STATES, RentalStatus
from rentals.web.panels import panels_context

# The poller's first wait; poll.js waits 1.5 times longer after each "nothing new", up to 30 s.
POLL_FAST_SECONDS = 2.0
POLL_SLOW_SECONDS = 15.0
POLLER_PARTIAL = "rentals/rental_detail.html#poller"
SECTION_PARTIAL = "rentals/rental_detail.html#progress"
POLL_TOKEN_SALT = "rentals.poll"  # noqa: S105 - a namespace for signatures, not a secret
POLL_TOKEN_SECONDS = 300  # the most a removed member or a changed role can still see
FRAGMENT_CACHE, FRAGMENT_SECONDS = "fragments", 600
_PUBLIC_ID = Rental._meta.get_field("public_id")  # a uuid column on PostgreSQL, 32 hex characters on SQLite

STEP_LABELS = ["Queued", "Sent", "Rented", "Nodes starting {running}/{nodes}", "Ready"]
# The step each status has reached (an index into STEP_LABELS).
STEP_REACHED: dict[str, int] = {
    RentalStatus.SCHEDULED: 0,
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
    RentalStatus.VERIFYING: 3,  # every node runs; the fabric check stands between them and Ready
    RentalStatus.CHECK_FAILED: 3,
    RentalStatus.READY: 4,
    RentalStatus.TERMINATING: 4,
    RentalStatus.TERMINATED: 4,
}


def poll_has_news(request: HttpRequest, rental: Rental) -> bool:
    """Return whether the polling page shows an older version, or a section that time alone may have changed."""
    try:
        version, due = int(request.GET.get("v", "")), int(request.GET.get("d", "0"))
    except ValueError:
        return True  # a page that cannot say what it shows gets the section
    return version != rental.version or (due > 0 and timezone.now().timestamp() >= due)


def progress_context(request: HttpRequest, rental: Rental, *, may_act: bool, poll_url: str) -> dict[str, object]:
    """Build what the rental page's progress section and poller show."""
    section, changes_at = _section_context(rental, may_act=may_act)
    return {**section, **_poller_context(request, rental, may_act=may_act, poll_url=poll_url, changes_at=changes_at)}


def poll_answer(request: HttpRequest, rental: Rental, *, may_act: bool, token: str = "") -> HttpResponse:
    """Answer a poll the caller has checked: 204 when nothing is new, else the next poller and the section.

    `token`: the poll's own valid token, passed on (until it expires) rather than signed anew.
    """
    if not poll_has_news(request, rental):
        return HttpResponse(status=204)
    section, changes_at = progress_section(rental, may_act=may_act)
    poller = _poller_context(
        request, rental, may_act=may_act, poll_url=request.path, changes_at=changes_at, token=token
    )
    return HttpResponse(render_to_string(POLLER_PARTIAL, poller) + section)


def _poller_context(
    request: HttpRequest, rental: Rental, *, may_act: bool, poll_url: str, changes_at: int, token: str = ""
) -> dict[str, object]:
    """What the poller partial needs: the URL it asks next, and after how long (neither once the rental is final)."""
    if rental.status in FINAL_STATES:
        return {}
    token = token or poll_token(request, rental_id=rental.pk, may_act=may_act)
    url = f"{poll_url}?v={rental.version}&t={token}" + (f"&d={changes_at}" if changes_at else "")
    return {
        "poller_url": url,
        "poller_delay": POLL_FAST_SECONDS if rental.status in IN_FLIGHT_STATES else POLL_SLOW_SECONDS,
    }


def _section_context(rental: Rental, *, may_act: bool) -> tuple[dict[str, object], int]:
    """Build what the progress section shows (the same for every viewer with the same `may_act`), and when time
    alone may change it (epoch seconds, or 0)."""
    all_members = list(rental.members.all())
    members = [member for member in all_members if member.gone_at is None]
    running = sum(1 for member in members if member.status == "RUNNING" and member.ssh_command)
    now = timezone.now()
    # Rendered before the nodes are due, the explanation changes when they are: the poller says when.
    due = rental_members_due_at(rental=rental) if not all_members else None
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


# --- For the poll ratios (bench/README.md, "The poll back on the template engine"): the plain poll missed them.


def poll_token(request: HttpRequest, *, rental_id: int, may_act: bool) -> str:
    """Sign what this browser session may poll (issue only after the full permission check)."""
    payload = [rental_id, int(may_act), _session_tag(request.session.session_key or "")]
    return signing.dumps(payload, salt=POLL_TOKEN_SALT, compress=False)


def poll_granted(request: HttpRequest, public_id: uuid.UUID) -> tuple[Rental, bool] | None:
    """Return the rental and whether the viewer may act, as the poll's token grants them, or None: check fully.

    For 5 minutes the token stands in for the session, user and permission lookups (so a removed member stops
    seeing progress within 5 minutes). It names the rental and this browser's session, which must still exist.
    """
    cookie = request.COOKIES.get(settings.SESSION_COOKIE_NAME, "")
    try:
        rental_id, may_act, tag = signing.loads(
            request.GET.get("t", ""), salt=POLL_TOKEN_SALT, max_age=POLL_TOKEN_SECONDS
        )
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if not cookie or not hmac.compare_digest(str(tag), _session_tag(cookie)):
        return None
    # Written out for the poll ratios: the ORM took about 100 times longer composing this query than SQLite
    # spent running it (3.7 ms against 30 µs in process on a loaded machine; bench/README.md).
    rental_table, session_table = Rental._meta.db_table, Session._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.version, r.status FROM {rental_table} r WHERE r.id = %s AND r.public_id = %s AND EXISTS "  # noqa: S608
            f"(SELECT 1 FROM {session_table} s WHERE s.session_key = %s AND s.expire_date > %s)",
            [int(rental_id), _PUBLIC_ID.get_db_prep_value(public_id, connection), cookie, timezone.now()],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    # A real instance with the other fields deferred (`progress_section` reads the whole row when it renders).
    known = {"id": int(rental_id), "version": row[0], "status": row[1], "public_id": public_id}
    names = [field.attname for field in Rental._meta.concrete_fields if field.attname in known]  # model order
    rental = Rental.from_db("default", names, [known[name] for name in names])
    return rental, bool(may_act)


def _session_tag(session_key: str) -> str:
    # A digest, so the URL never carries the session key itself.
    return hashlib.sha256(session_key.encode()).hexdigest()[:24]


def progress_section(rental: Rental, *, may_act: bool) -> tuple[str, int]:
    """Return the out-of-band section of this version and when time alone may change it (see `_section_context`),
    rendered once per process until then."""
    key = f"rental-progress:{rental.public_id.hex}:{rental.version}:{int(may_act)}"
    kept = caches[FRAGMENT_CACHE].get(key)
    if kept is not None and not (kept[1] and timezone.now().timestamp() >= kept[1]):
        return kept
    if rental.get_deferred_fields():  # read by `poll_granted`: the section needs the whole row
        rental = Rental.objects.get(pk=rental.pk)
    context, changes_at = _section_context(rental, may_act=may_act)
    html = render_to_string(SECTION_PARTIAL, {**context, "oob": True})
    # Every write that changes the section bumps the version; the only other change is the nodes becoming due.
    timeout = changes_at - int(timezone.now().timestamp()) if changes_at else FRAGMENT_SECONDS
    if timeout > 0:
        caches[FRAGMENT_CACHE].set(key, (html, changes_at), min(timeout, FRAGMENT_SECONDS))
    return html, changes_at
