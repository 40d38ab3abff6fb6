"""The user a request acts for."""

from django.contrib.auth.models import User
from django.http import HttpRequest


def request_user(request: HttpRequest) -> User:
    """Return the request's user: a page behind `login_required`, or an API call behind a key, always has one."""
    assert isinstance(request.user, User)
    return request.user
