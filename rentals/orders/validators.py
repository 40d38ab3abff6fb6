"""Validate what a customer types before it becomes part of an order (SSH keys: `accounts.validators`)."""

import re

from django.core.exceptions import ValidationError

POD_NAME_RE = re.compile(r"\A[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
POD_NAME_HELP = (
    "1 to 63 characters: lower-case letters, digits and hyphens, starting and ending with a letter or digit."
)


def validate_pod_name(value: str) -> None:
    """Refuse a pod name the upstream would not accept as a hostname-like label."""
    if not POD_NAME_RE.match(value or ""):
        raise ValidationError(f"Enter a valid pod name: {POD_NAME_HELP}", code="invalid_pod_name")
