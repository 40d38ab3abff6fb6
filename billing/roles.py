"""Customer admins: members who manage their own customer (invite, remove, lower its budget)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from accounts.models import Customer
from accounts.roles import is_operator
from billing.models import CustomerAdmin


def is_customer_admin(user: AbstractBaseUser | AnonymousUser, customer: Customer | int) -> bool:
    """Return whether the user administers this customer (as one of its members)."""
    if not user.is_authenticated:
        return False
    customer_id = customer if isinstance(customer, int) else customer.pk
    return CustomerAdmin.objects.filter(membership__user_id=user.pk, membership__customer_id=customer_id).exists()


def may_manage_team(user: AbstractBaseUser | AnonymousUser, customer: Customer | int) -> bool:
    """Return whether the user may invite and remove the customer's members: its admins and operators."""
    return is_operator(user) or is_customer_admin(user, customer)
