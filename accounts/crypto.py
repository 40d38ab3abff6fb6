"""Encrypt upstream secrets at rest with MultiFernet (newest key first, any key decrypts)."""

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


@cache
def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in settings.FIELD_ENCRYPTION_KEYS])


def encrypt_secret(plaintext: str) -> str:
    """Return the Fernet token for a secret."""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt_secret(token: str) -> str:
    """Return the secret a token holds; raise ValueError when no configured key opens it."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("The secret cannot be decrypted with the configured FIELD_ENCRYPTION_KEYS.") from exc


def rotate_secret(token: str) -> str:
    """Re-encrypt a token under the newest key."""
    return _fernet().rotate(token.encode()).decode()
