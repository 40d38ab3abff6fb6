"""Ending someone's sessions (django-allauth's usersessions): their own "sign out everywhere else", or a customer
admin signing a member out from the team page. Each end is audited and e-mailed to the user."""

from __future__ import annotations

from collections.abc import Iterable

from allauth.account.adapter import get_adapter as get_account_adapter
from allauth.core import context
from allauth.usersessions.adapter import DefaultUserSessionsAdapter
from allauth.usersessions.models import UserSession
from django.contrib.auth.models import User

from accounts.audit import account_change_record


def sessions_list(user: User) -> list[UserSession]:
    """Return the user's live sessions, newest first (ended ones are dropped on the way)."""
    live = UserSession.objects.purge_and_list(user)
    return sorted(live, key=lambda session: session.last_seen_at, reverse=True)


class DashboardUserSessionsAdapter(DefaultUserSessionsAdapter):
    def end_sessions(self, sessions: Iterable[UserSession]) -> None:
        """End the sessions, then audit and e-mail each user whose sessions ended (by whom: the request's user)."""
        sessions = list(sessions)
        super().end_sessions(sessions)
        request = context.request
        actor = request.user if request is not None and request.user.is_authenticated else None
        ended: dict[int, tuple[User, int]] = {}
        for session in sessions:
            user, count = ended.get(session.user_id, (session.user, 0))
            ended[session.user_id] = (user, count + 1)
        for user, count in ended.values():
            by_self = actor is None or actor.pk == user.pk
            who = "themselves" if by_self else actor.get_username()  # type: ignore[union-attr]
            account_change_record(
                user=user, what=f"{count} session(s) signed out by {who}", actor=actor, request=request
            )
            get_account_adapter(request).send_notification_mail(
                "account/email/sessions_ended", user, {"count": count, "by_self": by_self, "by": who}
            )
