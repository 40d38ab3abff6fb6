"""Customer admins invite people with a link (shown once, valid INVITATION_VALID_HOURS, usable once) and remove
members of their own customer. Only the token's SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import Customer, Membership
from billing.models import CustomerAdmin, Invitation

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


def invitation_accept(*, token: str, user: User) -> Membership:
    """Use the invitation once: the user joins that customer (and only it), as member or admin."""
    invitation = invitation_find(token=token)
    now = timezone.now()
    with transaction.atomic():
        # Conditional UPDATE: of two tabs accepting at once, exactly one uses the link.
        claimed = Invitation.objects.filter(pk=invitation.pk, used_at__isnull=True, expires_at__gt=now).update(
            used_at=now, used_by=user
        )
        if not claimed:
            raise ValidationError("This invitation link was already used. Ask for a new one.", code="used")
        membership, _ = Membership.objects.get_or_create(user=user, customer=invitation.customer)
        if invitation.role == Invitation.Role.ADMIN:
            CustomerAdmin.objects.get_or_create(membership=membership)
    return membership


def invitation_revoke(*, invitation: Invitation) -> None:
    Invitation.objects.filter(pk=invitation.pk, used_at__isnull=True).update(revoked_at=timezone.now())


def member_remove(*, membership: Membership, by: User) -> None:
    """Remove a member from the customer; nobody removes themselves (ask another admin or an operator)."""
    if membership.user_id == by.pk:
        raise ValidationError("You cannot remove yourself; ask another admin or an operator.")
    membership.delete()  # its admin role goes with it


def admin_set(*, membership: Membership, admin: bool) -> None:
    """Make a member an admin of their customer, or a plain member again."""
    if admin:
        CustomerAdmin.objects.get_or_create(membership=membership)
    else:
        CustomerAdmin.objects.filter(membership=membership).delete()
