"""SSH keys of people who left a customer, still on its running clusters (shown on the team page).

Removing a member ends their access to the dashboard at once, but not to the nodes: a cluster keeps the keys
it was rented with. Former members are the customer's non-members who rented for it, joined it by invitation,
or left it (recorded when a membership is deleted, however it was made). A running cluster of the customer is
listed, with whose key it holds, when a former member rented it (they chose its keys) or its stored request
body holds a key saved in a former member's profile; an admin may then terminate it. The keys in a former
member's other rentals are not taken as theirs: teammates' keys travel in the same list.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth.models import User

from accounts.models import Customer, SshPublicKey
from billing.models import FormerMember, Invitation
from rentals.models import Rental
from rentals.states import HOLDS_CLUSTER_STATES

MAX_RENTALS = 500  # the running clusters looked at, newest first


@dataclass(frozen=True)
class LeftKeyCluster:
    """A running cluster of the customer that carries the SSH key of someone who left it."""

    rental: Rental
    usernames: list[str]


def _key_id(line: str) -> str:
    """The key itself (type and base64), without its comment."""
    return " ".join(line.split()[:2])


def _body_keys(rental: Rental) -> list[str]:
    try:
        keys = json.loads(bytes(rental.request_body)).get("user_public_key") or []
    except (ValueError, AttributeError):
        return []
    return [_key_id(key) for key in keys if isinstance(key, str)]


def left_key_clusters(*, customer: Customer) -> list[LeftKeyCluster]:
    """Return the customer's running clusters that hold a former member's SSH key, with whose it is."""
    members = set(customer.memberships.values_list("user_id", flat=True))
    rentals = list(
        Rental.objects.filter(customer=customer, status__in=HOLDS_CLUSTER_STATES).order_by("-created_at")[:MAX_RENTALS]
    )
    invited = Invitation.objects.filter(customer=customer, used_by__isnull=False).values_list("used_by_id", flat=True)
    left = FormerMember.objects.filter(customer=customer).values_list("user_id", flat=True)
    former = ({r.created_by_id for r in rentals if r.created_by_id} | set(invited) | set(left)) - members
    if not former:
        return []
    owners: dict[str, set[int]] = defaultdict(set)  # key -> former members it belongs to
    for user_id, line in SshPublicKey.objects.filter(user_id__in=former).values_list("user_id", "public_key"):
        owners[_key_id(line)].add(user_id)
    names = dict(User.objects.filter(pk__in=former).values_list("pk", "username"))
    found = []
    for rental in rentals:
        who = {user_id for key in _body_keys(rental) for user_id in owners.get(key, ())}
        if rental.created_by_id in former:  # they chose its keys: one of them is likely theirs
            who.add(rental.created_by_id)
        if who:
            found.append(LeftKeyCluster(rental=rental, usernames=sorted(names[user_id] for user_id in who)))
    return found
