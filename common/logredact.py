"""Keep invitation tokens out of every log line: a filter for Django's handlers and gunicorn's loggers.

An invitation link is `/invite/<token>/`; its landing moves the token into the session at once, but the landing's
own request line (gunicorn's access log, Django's dev server, `django.request` on a 4xx) still names it. Whatever
follows `/invite/` in a logged line is replaced, so a log reader never holds a usable link. No Django import:
gunicorn loads this before the app.
"""

from __future__ import annotations

import logging
import re

# `/invite/` then one path segment (the token), in a path, a full URL or a quoted request line.
_INVITE_TOKEN = re.compile(r"(/invite/)(?!\[redacted\])([^/\s?#\"'<>]+)")
REDACTED = r"\1[redacted]"


def redact_invitation_tokens(text: str) -> str:
    """Return the text with every invitation token in it replaced by `[redacted]`."""
    return _INVITE_TOKEN.sub(REDACTED, text)


class RedactInvitationTokens(logging.Filter):
    """Rewrite a record whose message (or the request it carries) names an invitation token."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a record whose arguments do not fit its format: left as it is
            return True
        if "/invite/" in message:
            record.msg, record.args = redact_invitation_tokens(message), None
        # `django.request` attaches the request; a JSON formatter would print its repr (with the path).
        request = getattr(record, "request", None)
        if request is not None and "/invite/" in str(getattr(request, "path", "")):
            record.request = redact_invitation_tokens(repr(request))
        return True
