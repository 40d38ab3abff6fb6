"""Every row holding an encrypted secret (accounts.crypto.ENCRYPTED_FIELDS): rotate them all, find those that do
not decrypt. Reports name the model, primary key and field, never the token or the secret."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.apps import apps

from accounts.crypto import ENCRYPTED_FIELDS, is_under_newest_key, secret_decrypt, secret_rotate


@dataclass(frozen=True)
class SecretRow:
    model: str
    pk: object
    field: str

    def __str__(self) -> str:
        return f"{self.model} pk={self.pk} {self.field}"


def _tokens() -> Iterator[tuple[SecretRow, str]]:
    for label, field in ENCRYPTED_FIELDS:
        model = apps.get_model(label)
        for pk, token in model._default_manager.order_by("pk").values_list("pk", field).iterator():
            yield SecretRow(label, pk, field), token


def secrets_undecryptable(*, limit: int | None = None) -> list[SecretRow]:
    """Return the rows whose secret no configured key opens (at most `limit` of them)."""
    found: list[SecretRow] = []
    for row, token in _tokens():
        try:
            secret_decrypt(token)
        except ValueError:
            found.append(row)
            if limit is not None and len(found) >= limit:
                break
    return found


def secrets_not_under_newest_key() -> list[SecretRow]:
    """Return the rows that still need the older keys (rotate before dropping them)."""
    return [row for row, token in _tokens() if not is_under_newest_key(token)]


def secrets_rotate() -> tuple[int, list[SecretRow]]:
    """Re-encrypt every secret under the newest key; return how many were, and the rows no key opens."""
    rotated, failed = 0, []
    for row, token in _tokens():
        try:
            fresh = secret_rotate(token)
        except ValueError:
            failed.append(row)
            continue
        model = apps.get_model(row.model)
        # Only if unchanged meanwhile: a secret set a moment ago is already under the newest key.
        rotated += model._default_manager.filter(pk=row.pk, **{row.field: token}).update(**{row.field: fresh})
    return rotated, failed
