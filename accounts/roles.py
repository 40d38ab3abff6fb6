"""Staff roles. Support reads everything and changes nothing; operators act on any rental.

Roles are Django groups (so the admin manages them); superusers have every role.
"""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

SUPPORT_GROUP = "support"
OPERATOR_GROUP = "operator"


def _groups(user: AbstractBaseUser | AnonymousUser) -> set[str]:
    # Cached on the user object: a page asks several times and the answer cannot change mid-request.
    cached = getattr(user, "_role_groups", None)
    if cached is None:
        groups = getattr(user, "groups", None)
        cached = set(groups.values_list("name", flat=True)) if user.is_authenticated and groups is not None else set()
        user._role_groups = cached  # type: ignore[union-attr]
    return cached


def is_operator(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Return whether the user may act on any rental."""
    return bool(user.is_authenticated and (getattr(user, "is_superuser", False) or OPERATOR_GROUP in _groups(user)))


def is_staff_reader(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Return whether the user may read every rental (support, operators, superusers)."""
    return is_operator(user) or (user.is_authenticated and SUPPORT_GROUP in _groups(user))
