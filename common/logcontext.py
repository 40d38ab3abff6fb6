"""Bind rental, user and upstream identifiers to every log line of a piece of work.

`bind(rental_id=…, idempotency_key=…)` sets context variables; `ContextFilter` copies them onto each log
record, so a JSON formatter prints them as fields. Only the names in CONTEXT_FIELDS are ever bound: a
secret cannot reach a log line through here (secrets are redacted by construction).
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

CONTEXT_FIELDS = ("rental_id", "idempotency_key", "request_id", "user", "customer", "task")
_context: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("log_context", default={})  # noqa: B039

# Belt and braces for messages written by libraries: mask anything shaped like a credential header.
_SECRET_PATTERNS = re.compile(r"(?i)(x-api-key|authorization|bearer)(['\"]?\s*[:=]\s*['\"]?|\s+)([^\s,'\"}]+)")


@contextmanager
def bind(**fields: object) -> Iterator[None]:
    """Add fields to the log context for the duration of the block."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"Not a log context field: {sorted(unknown)}")
    token = _context.set({**_context.get(), **{k: str(v) for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Copy the bound context onto each record and mask credential-shaped text."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in _context.get().items():
            setattr(record, name, value)
        if isinstance(record.msg, str) and _SECRET_PATTERNS.search(record.getMessage()):
            record.msg = _SECRET_PATTERNS.sub(r"\1\2<redacted>", record.getMessage())
            record.args = None
        return True
