"""The README's older name for `rotate_secrets`: it now re-encrypts every secret, not only credentials."""

from accounts.management.commands.rotate_secrets import Command as RotateSecrets


class Command(RotateSecrets):
    pass
