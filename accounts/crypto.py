"""Encrypt secrets at rest with MultiFernet (newest key first, any key decrypts).

ENCRYPTED_FIELDS lists every column that holds a Fernet token, once: the rotation command re-encrypts them
all and the checks (`manage.py check_secrets`, /readyz) read them all (`accounts/secret_rows.py`). A new
encrypted column goes here too; a test fails on one named `*_encrypted` that is missing.
"""

from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

# (model label, field name): labels, not classes, because accounts imports no app above it.
ENCRYPTED_FIELDS: tuple[tuple[str, str], ...] = (
    ("accounts.UpstreamCredential", "secret_encrypted"),
    ("notifications.WebhookEndpoint", "secret_encrypted"),
    ("rentals.FabricCheck", "private_key_encrypted"),
    ("sso.SsoConfig", "client_secret_encrypted"),
)


@cache
def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in settings.FIELD_ENCRYPTION_KEYS])


@cache
def _newest() -> Fernet:
    return Fernet(settings.FIELD_ENCRYPTION_KEYS[0].encode())


@receiver(setting_changed)
def _forget_keys(*, setting: str, **kwargs: Any) -> None:
    # Tests (and only tests) change the keys inside one process.
    if setting == "FIELD_ENCRYPTION_KEYS":
        _fernet.cache_clear()
        _newest.cache_clear()


def secret_encrypt(plaintext: str) -> str:
    """Return the Fernet token for a secret."""
    return _fernet().encrypt(plaintext.encode()).decode()


def secret_decrypt(token: str) -> str:
    """Return the secret a token holds; raise ValueError when no configured key opens it."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("The secret cannot be decrypted with the configured FIELD_ENCRYPTION_KEYS.") from exc


def secret_rotate(token: str) -> str:
    """Re-encrypt a token under the newest key; raise ValueError when no configured key opens it."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("The secret cannot be decrypted with the configured FIELD_ENCRYPTION_KEYS.") from exc


def is_under_newest_key(token: str) -> bool:
    """Return whether the newest key alone opens the token (so dropping the older keys loses nothing)."""
    try:
        _newest().decrypt(token.encode())
    except InvalidToken:
        return False
    return True
