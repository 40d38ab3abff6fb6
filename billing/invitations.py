"""Customer admins invite people with a link (shown once, valid INVITATION_VALID_HOURS, usable once) and remove
members of their own customer. Only the token's SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Customer, Membership
from billing.models import CustomerAdmin, FormerMember, Invitation
from billing.roles import may_manage_team
from notifications.services import emails_end_for, endpoints_disable_made_by

TOKEN_PREFIX = "inv_"  # noqa: S105 (a label, not a secret)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class NewInvitation:
    invitation: Invitation
    token: str  # shown once, in the link


def invitation_create(*, customer: Customer, created_by: User, role: str = Invitation.Role.MEMBER) -> NewInvitation:
    """Make an invitation to this customer and return it with its token (never available again)."""
    if role not in Invitation.Role.values:
        raise ValidationError("Choose the role: member or admin.")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    invitation = Invitation.objects.create(
        customer=customer,
        token_sha256=token_hash(token),
        role=role,
        created_by=created_by,
        created_at=now,
        expires_at=now + timedelta(hours=settings.INVITATION_VALID_HOURS),
    )
    return NewInvitation(invitation=invitation, token=token)


def invitation_find(*, token: str, now: datetime | None = None) -> Invitation:
    """Return the open invitation for this token; raise ValidationError saying why it cannot be used."""
    now = now or timezone.now()
    invitation = Invitation.objects.select_related("customer").filter(token_sha256=token_hash(token or "")).first()
    if invitation is None or invitation.revoked_at is not None:
        raise ValidationError("This invitation link is not valid. Ask for a new one.", code="invalid")
    if invitation.used_at is not None:
        raise ValidationError("This invitation link was already used. Ask for a new one.", code="used")
    if invitation.expires_at <= now:
        raise ValidationError("This invitation link has expired. Ask for a new one.", code="expired")
    if not invitation.customer.active:
        raise ValidationError("This customer is no longer active.", code="inactive")
    return invitation


def _maker_may_invite(invitation: Invitation) -> bool:
    """Whether whoever made the invitation may still make it: an admin of its customer or an operator.

    The same rule for member and admin links (only admins and operators make either): a demoted or removed admin's
    links die with their role, whatever they invite to.
    """
    maker = invitation.created_by
    return maker is not None and maker.is_active and may_manage_team(maker, invitation.customer_id)


def invitation_accept(*, token: str, user: User | None = None, signup: Callable[[], User] | None = None) -> Membership:
    """Use the invitation once: the user (or the account `signup` creates) joins that customer, as member or admin.

    Everything is re-checked in one transaction with the membership and the new account: the link unused,
    unrevoked, unexpired, its customer active and its maker still entitled; a refusal leaves no account behind.
    """
    invitation = invitation_find(token=token)
    now = timezone.now()
    with transaction.atomic():
        # Conditional UPDATE on the row's own columns (a join would not be re-checked under concurrency): of two
        # tabs accepting at once exactly one uses the link, and a link revoked since the lookup above (a demotion
        # revokes with an UPDATE on the same row) is refused.
        claimed = Invitation.objects.filter(
            pk=invitation.pk, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
        ).update(used_at=now)
        if not claimed:
            invitation_find(token=token, now=now)  # raises with the reason
            raise ValidationError("This invitation link is not valid. Ask for a new one.", code="invalid")
        # The customer row locked: a pause either came first (refused here) or waits for this join to commit.
        if not Customer.objects.select_for_update().filter(pk=invitation.customer_id, active=True).exists():
            raise ValidationError("This customer is no longer active.", code="inactive")
        if not _maker_may_invite(invitation):
            raise ValidationError(
                "Whoever made this invitation can no longer invite to this customer. Ask an admin for a new one.",
                code="maker",
            )
        joiner = user if user is not None else _signed_up(signup)
        Invitation.objects.filter(pk=invitation.pk).update(used_by=joiner)
        membership, _ = Membership.objects.get_or_create(user=joiner, customer=invitation.customer)
        if invitation.role == Invitation.Role.ADMIN:
            CustomerAdmin.objects.get_or_create(membership=membership)
    return membership


def _signed_up(signup: Callable[[], User] | None) -> User:
    if signup is None:
        raise ValueError("Give the user who joins, or how to create their account.")
    try:
        with transaction.atomic():
            return signup()
    except IntegrityError as exc:  # the username was taken since the form checked it
        raise ValidationError("That username was just taken; choose another.", code="username") from exc


def invitation_revoke(*, invitation: Invitation) -> None:
    Invitation.objects.filter(pk=invitation.pk, used_at__isnull=True).update(revoked_at=timezone.now())


def _grants_end(membership: Membership, *, why: str, left: bool) -> None:
    """End what the person made as a member or admin of this customer: their open invitation links and their
    webhook endpoints (which would keep receiving the customer's events, SSH lines included); when they `left`
    (removed or deactivated, not demoted), also their pending e-mails of its events."""
    Invitation.objects.filter(
        customer_id=membership.customer_id,
        created_by_id=membership.user_id,
        used_at__isnull=True,
        revoked_at__isnull=True,
    ).update(revoked_at=timezone.now())
    reason = f"{membership.user} {why}"
    endpoints_disable_made_by(customer_id=membership.customer_id, user_id=membership.user_id, reason=reason)
    if left:
        emails_end_for(customer_id=membership.customer_id, user_id=membership.user_id, reason=reason)


def member_remove(*, membership: Membership, by: User) -> None:
    """Remove a member from the customer and end what they made for it; nobody removes themselves."""
    if membership.user_id == by.pk:
        raise ValidationError("You cannot remove yourself; ask another admin or an operator.")
    with transaction.atomic():
        membership.delete()  # its admin role goes with it; `membership_deleting` ends what they made


def membership_deleting(*, instance: Membership, origin: object = None, **_kwargs: object) -> None:
    """End what a member made for the customer, however the membership is deleted (the team page, the Django
    admin's inline, a customer deleted): a `pre_delete` receiver, in the deletion's transaction.

    When the membership itself is deleted (not its user or customer, which take the record with them), the
    person is remembered as a former member: the team page names their SSH keys on running clusters.
    """
    _grants_end(instance, why="is no longer a member", left=True)
    if isinstance(origin, Membership) or (isinstance(origin, QuerySet) and origin.model is Membership):
        FormerMember.objects.update_or_create(
            customer_id=instance.customer_id, user_id=instance.user_id, defaults={"left_at": timezone.now()}
        )


def user_deactivating(*, instance: User, raw: bool = False, **_kwargs: object) -> None:
    """Deactivating a user (the usual offboarding, e.g. in the Django admin) ends what removal ends, for every
    customer they belong to: a `pre_save` receiver, so only a change from active to inactive counts."""
    if raw or instance.pk is None or instance.is_active:
        return
    if not User.objects.filter(pk=instance.pk, is_active=True).exists():
        return  # already inactive: saving it again ends nothing new
    for membership in Membership.objects.filter(user_id=instance.pk).select_related("user"):
        _grants_end(membership, why="was deactivated", left=True)


def admin_set(*, membership: Membership, admin: bool) -> None:
    """Make a member an admin of their customer, or a plain member again (ending what they made as admin)."""
    if admin:
        CustomerAdmin.objects.get_or_create(membership=membership)
        return
    with transaction.atomic():
        demoted, _ = CustomerAdmin.objects.filter(membership=membership).delete()
        if demoted:
            _grants_end(membership, why="is no longer an admin", left=False)
