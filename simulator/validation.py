"""Small validators shared by the routes: SSH keys, names, customer refs, template tags."""

from __future__ import annotations

import base64
import binascii
import re
import struct

SSH_KEY_TYPES = {
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
}

POD_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
CUSTOMER_REF_RE = re.compile(r"^[A-Za-z0-9._:@-]{1,64}$")
IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")


def ssh_key_problem(value: object) -> str | None:
    """Return why ``value`` is not an OpenSSH public key line, or None when it is one."""
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty string"
    parts = value.strip().split(None, 2)
    if len(parts) < 2:
        return "must look like '<type> <base64> [comment]'"
    key_type, blob = parts[0], parts[1]
    if key_type not in SSH_KEY_TYPES:
        return f"unsupported key type {key_type!r}"
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return "key data is not valid base64"
    # The blob starts with a length-prefixed copy of the key type; a mismatch means a mangled key.
    if len(raw) < 4:
        return "key data is too short"
    (length,) = struct.unpack(">I", raw[:4])
    if raw[4 : 4 + length].decode("ascii", "replace") != key_type or len(raw) <= 4 + length:
        return "key data does not match its type"
    return None


def customer_ref_problem(value: str) -> str | None:
    """Return why an X-Customer-Ref value is refused, or None."""
    if not CUSTOMER_REF_RE.match(value):
        return "X-Customer-Ref must be 1-64 characters of A-Z a-z 0-9 . _ : @ -"
    return None


def tag_key(tag: str | None) -> list[tuple[int, int | str]]:
    """Sort key for template tags: numeric parts as numbers, text lower than any number."""
    parts = re.split(r"[.-]", tag or "latest")
    return [(1, int(p)) if p.isdigit() else (0, p) for p in parts]
