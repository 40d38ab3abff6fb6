"""`Idempotency-Key` on `POST /api/v1/rentals`, with the upstream's semantics (upstream-api.md §12).

Within 24 h, per user: the same key with a byte-identical body returns the first answer (status and body)
with `Idempotent-Replayed: true`; a different body gets 422 `idempotency_key_reused`; a repeat while the
first is still being worked on gets 409 `idempotency_in_progress`.

The key is claimed (`in_progress`) in its own short transaction before the order is validated, so a
concurrent repeat meets the unique constraint at once instead of waiting behind an upstream call. The
rental row and the stored answer commit in one transaction, so an `in_progress` record whose holder died
has created nothing; after LOCK_SECONDS a repeat may take it over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from api.errors import ApiError
from api.models import IdempotencyRecord

RETENTION = timedelta(hours=24)
LOCK_SECONDS = 300
KEY_RE = re.compile(r"\A[\x21-\x7e]{1,255}\Z")


@dataclass(frozen=True)
class Replay:
    status: int
    body: str


def idempotency_key_validate(key: str) -> None:
    if not KEY_RE.match(key):
        raise ApiError(
            400,
            "invalid_idempotency_key",
            "The Idempotency-Key header must be 1 to 255 visible ASCII characters.",
            hint="Use a fresh UUID per order, and the same one when you repeat that order.",
        )


def idempotency_begin(*, user: User, key: str, body_sha256: str) -> IdempotencyRecord | Replay:
    """Claim `key` for this request, or return the stored answer to replay; raise 409/422 as the upstream does."""
    now = timezone.now()
    IdempotencyRecord.objects.filter(created_at__lt=now - RETENTION).delete()
    for _ in range(3):
        try:
            with transaction.atomic():
                return IdempotencyRecord.objects.create(
                    user=user, key=key, body_sha256=body_sha256, created_at=now, locked_at=now
                )
        except IntegrityError:
            pass
        record = IdempotencyRecord.objects.filter(user=user, key=key).first()
        if record is None:  # purged between the insert and the read: try again
            continue
        if record.body_sha256 != body_sha256:
            raise ApiError(
                422,
                "idempotency_key_reused",
                "This Idempotency-Key was already used with a different request body.",
                hint="Send the same bytes to repeat an order, or use a new key for a new order.",
            )
        if record.status == IdempotencyRecord.Status.DONE:
            return Replay(status=record.response_status or 200, body=record.response_body)
        stale = now - timedelta(seconds=LOCK_SECONDS)
        if record.locked_at < stale:
            taken = IdempotencyRecord.objects.filter(
                pk=record.pk, status=IdempotencyRecord.Status.IN_PROGRESS, locked_at=record.locked_at
            ).update(locked_at=now)
            if taken:
                record.locked_at = now
                return record
        raise ApiError(
            409,
            "idempotency_in_progress",
            "A request with this Idempotency-Key is still being processed.",
            hint="Wait a moment and repeat the same request; you will get its answer.",
            headers={"Retry-After": "1"},
        )
    raise ApiError(409, "idempotency_in_progress", "A request with this Idempotency-Key is being processed.")


class LostIdempotencyLock(Exception):
    """Another request took this key over (ours ran past the lock); our work must roll back."""


def idempotency_finish(*, record: IdempotencyRecord, status: int, body: str) -> None:
    """Store the answer to replay (call inside the transaction that created what it describes).

    Only the holder of the lock may finish: if a repeat took the key over after LOCK_SECONDS, raise so the
    caller's transaction (and the rental it created) rolls back instead of a second rental standing.
    """
    finished = IdempotencyRecord.objects.filter(
        pk=record.pk, status=IdempotencyRecord.Status.IN_PROGRESS, locked_at=record.locked_at
    ).update(status=IdempotencyRecord.Status.DONE, response_status=status, response_body=body)
    if not finished:
        raise LostIdempotencyLock(f"Idempotency record {record.pk} was taken over by a repeat.")


def idempotency_abandon(*, record: IdempotencyRecord) -> None:
    """Release the key without an answer (a transient failure): a repeat runs the request afresh.

    Only the holder's claim is deleted (same lock stamp): if a repeat took the key over meanwhile, the key
    stays the repeat's, so a third request cannot start a second order beside it.
    """
    IdempotencyRecord.objects.filter(
        pk=record.pk, status=IdempotencyRecord.Status.IN_PROGRESS, locked_at=record.locked_at
    ).delete()
