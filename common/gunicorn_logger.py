"""Gunicorn's logger with invitation tokens redacted from its access and error logs (deploy/gunicorn.conf.py)."""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from common.logredact import RedactInvitationTokens


class RedactingLogger(Logger):
    """Gunicorn's own logger, its access and error lines passed through `RedactInvitationTokens`."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            if not any(isinstance(existing, RedactInvitationTokens) for existing in log.filters):
                log.addFilter(RedactInvitationTokens())
