"""Expose the user's roles to templates."""

from django.http import HttpRequest

from accounts.roles import is_operator, is_staff_reader


def roles(request: HttpRequest) -> dict[str, bool]:
    """Return role flags so templates can show or hide staff links and buttons."""
    user = request.user
    return {"user_is_operator": is_operator(user), "user_is_staff_reader": is_staff_reader(user)}
