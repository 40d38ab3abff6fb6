"""The check's own SSH key pair: made fresh for each check, added to the order, removed by the check."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncssh

KEY_COMMENT = "lium-dashboard-check"


@dataclass(frozen=True)
class CheckKey:
    """A private key (OpenSSH PEM; never logged or shown, so kept out of repr) and its public key line."""

    private_pem: str = field(repr=False)
    public_line: str


def check_key_generate() -> CheckKey:
    """Return a fresh ed25519 key pair whose public line ends with the comment `lium-dashboard-check`."""
    key = asyncssh.generate_private_key("ssh-ed25519", comment=KEY_COMMENT)
    return CheckKey(
        private_pem=key.export_private_key("openssh").decode(),
        public_line=key.export_public_key("openssh").decode().strip(),
    )
