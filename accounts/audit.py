"""Support reading customers' data leaves a trail: who read what of which customer, and when; and every change
to someone's sign-in (password, e-mail, two-factor, sessions) is an `AccountChange` (`account_change_record`).

Support (a staff reader who is not an operator) reads every customer's data to help them; each such read is
recorded at most once per reader, customer and page per SUPPORT_VIEW_EVERY, so reading stays cheap to audit.
One rental's reads go on its timeline (`rentals.audit`); every other read of a customer's data (its webhook
endpoints and deliveries, its team, its usage) is a `SupportRead` row. Operators act on every rental and are
not recorded as readers; nor is support reading a customer it is a member of (it reads as a member).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import (
    ACCOUNT_CHANGE_WHAT_MAX_LENGTH,
    SUPPORT_READ_WHAT_MAX_LENGTH,
    AccountChange,
    Membership,
    SupportRead,
)
from accounts.roles import is_operator, is_staff_reader
from common.client_address import throttle_address

SUPPORT_VIEW_EVERY = timedelta(minutes=10)


def is_support_reader(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Return whether this user's reads of customers' data are recorded: support, not an operator."""
    return user.pk is not None and is_staff_reader(user) and not is_operator(user)


def customers_read_by_support(
    *, user: AbstractBaseUser | AnonymousUser, customer_ids: Iterable[int | None]
) -> set[int]:
    """Return which of the customers this user reads as support (none for members, operators, others)."""
    reader_id = user.pk
    if reader_id is None or not is_support_reader(user):
        return set()
    wanted = {customer_id for customer_id in customer_ids if customer_id is not None}
    if not wanted:
        return set()
    own = Membership.objects.filter(user_id=reader_id, customer_id__in=wanted).values_list("customer_id", flat=True)
    return wanted - set(own)


def support_read_record(
    *, user: AbstractBaseUser | AnonymousUser, customer_ids: Iterable[int | None], what: str
) -> int:
    """Record that support read `what` of each customer (at most once per interval); return how many rows."""
    outside = customers_read_by_support(user=user, customer_ids=customer_ids)
    if not outside:
        return 0
    what = what[:SUPPORT_READ_WHAT_MAX_LENGTH]
    now = timezone.now()
    # One query finds the customers already recorded within the interval, however many the page shows.
    recent = SupportRead.objects.filter(
        actor_id=user.pk, what=what, customer_id__in=outside, at__gte=now - SUPPORT_VIEW_EVERY
    ).values_list("customer_id", flat=True)
    new = [
        SupportRead(customer_id=customer_id, actor_id=user.pk, what=what, at=now)
        for customer_id in sorted(outside - set(recent))
    ]
    SupportRead.objects.bulk_create(new)
    return len(new)


def account_change_record(
    *, user: User, what: str, actor: User | None = None, request: HttpRequest | None = None
) -> None:
    """Record a change to `user`'s sign-in (password, e-mail, two-factor, sessions): by `actor` (None: the user
    themselves, or a reset link), from the request's client address."""
    address = throttle_address(request) if request is not None else None
    AccountChange.objects.create(
        user=user,
        username=user.get_username(),
        actor=actor or user,
        what=what[:ACCOUNT_CHANGE_WHAT_MAX_LENGTH],
        address=address,
    )
