"""A rental page's live progress: what its progress section shows, and whether a poll has anything new.

The page's poller (`rental_detail.html#poller`) sends the version it shows (`v`) and, when time alone may change
the section (a `rented` rental's nodes becoming overdue, `rentals.explanations`), from when (`d`, epoch seconds).
Every write that changes what the section shows bumps `Rental.version`, so a poll of the current version before
`d` has nothing new: the view answers 204 and the poller backs off (`static/js/poll.js`). Otherwise the view
renders the poller and the section (out of band) the ordinary way. The model is Healthchecks' `status_single`.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.utils import timezone

from rentals.explanations import rental_explanation
from rentals.launch import cluster_launch
from rentals.models import Rental
from rentals.panels import panels_context
from rentals.selectors import members_due_at
from rentals.states import FINAL_STATES, HOLDS_CLUSTER_STATES, IN_FLIGHT_STATES, RentalStatus

# The poller's first wait; poll.js waits 1.5 times longer after each "nothing new", up to 30 s.
POLL_FAST_SECONDS = 2.0
POLL_SLOW_SECONDS = 15.0

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


def poll_has_news(request: HttpRequest, rental: Rental) -> bool:
    """Return whether the polling page shows an older version, or a section that time alone may have changed."""
    try:
        version, due = int(request.GET.get("v", "")), int(request.GET.get("d", "0"))
    except ValueError:
        return True  # a page that cannot say what it shows gets the section
    return version != rental.version or (due > 0 and timezone.now().timestamp() >= due)


def progress_context(rental: Rental, *, may_act: bool, poll_url: str) -> dict[str, object]:
    """Build what the progress section shows (the same for every viewer with the same `may_act`) and its poller."""
    all_members = list(rental.members.all())
    members = [member for member in all_members if member.gone_at is None]
    running = sum(1 for member in members if member.status == "RUNNING" and member.ssh_command)
    now = timezone.now()
    # Rendered before the nodes are due, the explanation changes when they are: the poller says when.
    due = members_due_at(rental) if not all_members else None
    changes_at = int(due.timestamp()) + 1 if due is not None and due >= now else 0
    poll = rental.status not in FINAL_STATES
    delay = POLL_FAST_SECONDS if rental.status in IN_FLIGHT_STATES else POLL_SLOW_SECONDS
    return {
        "rental": rental,
        "attempts": list(rental.attempts.all()),
        "members": members,
        "launch": cluster_launch(members, gpus_per_node=rental.gpus_per_node),
        "explanation": rental_explanation(rental, now=now),
        "poll": poll,
        "poller_url": f"{poll_url}?v={rental.version}" + (f"&d={changes_at}" if changes_at else "") if poll else "",
        "poller_delay": delay,
        "steps": _steps(rental, running, has_members=bool(members)),
        "may_act": may_act,
        "holds_cluster": HOLDS_CLUSTER_STATES,
        **panels_context(rental, all_members=all_members, live=members),  # removal, connect, failures
    }


def _steps(rental: Rental, running: int, *, has_members: bool) -> list[dict[str, object]]:
    """Return the stepper: queued → sent → rented → nodes starting k/N → ready."""
    reached = 3 if rental.status == RentalStatus.RENTED and has_members else STEP_REACHED.get(rental.status, 0)
    labels = [label.format(running=running, nodes=rental.node_count) for label in STEP_LABELS]
    return [
        {"label": label, "done": index < reached or (index == reached == 4), "current": index == reached}
        for index, label in enumerate(labels)
    ]
