"""Keyset cursors for rental lists, newest first: the "my rentals" pages and the API page the same way.

A cursor names the last row shown (its creation time and id), so the next page is "older than this row" and
reads the (customer, created) index however deep it is. Its text is URL-safe base64 of `["<iso time>", <id>]`,
the API's documented `next_cursor`; callers treat it as opaque.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime

from django.db.models import Q, QuerySet

from rentals.models import Rental


class InvalidCursor(ValueError):
    """The cursor was not made by `cursor_encode` (garbled, edited or out of range)."""


def cursor_encode(rental: Rental) -> str:
    """Return the cursor of the page that follows `rental` (the last row shown)."""
    raw = json.dumps([rental.created_at.isoformat(), rental.pk]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_decode(cursor: str) -> tuple[datetime, int]:
    """Return the (created_at, id) a cursor names; raise InvalidCursor for anything `cursor_encode` did not make."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, pk = json.loads(raw)
        at = datetime.fromisoformat(created)
        if at.tzinfo is None or not isinstance(pk, int) or isinstance(pk, bool) or not 0 < pk < 2**62:
            raise ValueError
        return at.astimezone(UTC), pk
    except (ValueError, TypeError, OverflowError, RecursionError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursor("The cursor is not valid.") from exc


def rentals_older_than(rentals: QuerySet[Rental], cursor: str) -> QuerySet[Rental]:
    """Keep the rentals after the cursor's row in newest-first order; raise InvalidCursor for a bad cursor."""
    at, pk = cursor_decode(cursor)
    # created_at <= at first: a range on the index's second column; the OR only settles equal timestamps.
    return rentals.filter(Q(created_at__lte=at) & (Q(created_at__lt=at) | Q(id__lt=pk)))


def rentals_page(rentals: QuerySet[Rental], *, limit: int) -> tuple[list[Rental], str | None]:
    """Return the first `limit` rentals and the cursor of the next page (None when this page is the last)."""
    rows = list(rentals[: limit + 1])
    page = rows[:limit]
    return page, cursor_encode(page[-1]) if len(rows) > limit else None
