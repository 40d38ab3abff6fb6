"""Record support reading a rental: on the ops timeline, the customer pages and the API alike.

A view is recorded at most once per user and rental per SUPPORT_VIEW_EVERY, so reading is cheap to audit.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.utils import timezone

from accounts.models import Membership
from accounts.roles import is_operator, is_staff_reader
from rentals.models import Rental, RentalEvent

SUPPORT_VIEW_EVERY = timedelta(minutes=10)


def support_view_record(*, rental: Rental, user: User) -> bool:
    """Record that support opened the rental's timeline, at most once per user and rental per 10 minutes."""
    now = timezone.now()
    recent = RentalEvent.objects.filter(
        rental_id=rental.pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor=user, at__gte=now - SUPPORT_VIEW_EVERY
    ).exists()
    if recent:
        return False
    RentalEvent.objects.create(
        rental_id=rental.pk, kind=RentalEvent.Kind.SUPPORT_VIEW, actor=user, message=f"Viewed by {user.get_username()}."
    )
    return True


def support_reads(*, user: AbstractBaseUser | AnonymousUser, rentals: Iterable[Rental]) -> None:
    """Record a support view of each rental that is not of the reader's own customers (operators: none)."""
    if not is_staff_reader(user) or is_operator(user) or user.pk is None:
        return
    rentals = list(rentals)
    if not rentals:
        return
    own = set(Membership.objects.filter(user_id=user.pk).values_list("customer_id", flat=True))
    outside = {rental.pk: rental for rental in rentals if rental.customer_id not in own}
    # One query finds the rentals already recorded within the interval, so a listed page costs no query per row.
    recent = set(
        RentalEvent.objects.filter(
            rental_id__in=outside,
            kind=RentalEvent.Kind.SUPPORT_VIEW,
            actor_id=user.pk,
            at__gte=timezone.now() - SUPPORT_VIEW_EVERY,
        ).values_list("rental_id", flat=True)
    )
    for pk, rental in outside.items():
        if pk not in recent:
            support_view_record(rental=rental, user=user)  # type: ignore[arg-type]
