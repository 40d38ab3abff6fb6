"""Validate SSH public keys as a customer pastes them (saved keys and rent orders both use these)."""

import base64
import binascii
import struct

from django.core.exceptions import ValidationError

SSH_KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)


def validate_ssh_public_key(line: str) -> str:
    """Return the key normalised to `type base64 [comment]`; raise ValidationError saying what is wrong."""
    parts = line.strip().split(None, 2)
    if len(parts) < 2:
        raise ValidationError(
            "An SSH public key looks like 'ssh-ed25519 AAAA… comment' (type, then the key).", code="invalid_ssh_key"
        )
    key_type, blob = parts[0], parts[1]
    if key_type not in SSH_KEY_TYPES:
        raise ValidationError(
            f"'{key_type[:40]}' is not an SSH public key type (expected one of: ssh-ed25519, ssh-rsa, ecdsa-…). "
            "Paste the .pub file, not the private key.",
            code="invalid_ssh_key",
        )
    try:
        raw = base64.b64decode(blob, validate=True)
        (length,) = struct.unpack(">I", raw[:4])
        embedded_type = raw[4 : 4 + length].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ValidationError(
            "The key data is not valid base64 for an SSH public key.", code="invalid_ssh_key"
        ) from exc
    if embedded_type != key_type:
        raise ValidationError(
            f"The key data is for '{embedded_type[:40]}', not '{key_type}': the key is damaged.", code="invalid_ssh_key"
        )
    if any(ord(ch) < 32 for ch in line.strip()):
        raise ValidationError("The key contains control characters.", code="invalid_ssh_key")
    return " ".join(parts)


def ssh_public_keys_parse(text: str) -> list[str]:
    """Split pasted text into keys (one per line) and validate each; name the line that is wrong."""
    keys: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.strip().startswith("#"):
            continue
        try:
            keys.append(validate_ssh_public_key(line))
        except ValidationError as exc:
            raise ValidationError(f"Line {number}: {exc.messages[0]}", code="invalid_ssh_key") from exc
    if not keys:
        raise ValidationError("Add at least one SSH public key: you need it to log in to the nodes.", code="required")
    return keys
