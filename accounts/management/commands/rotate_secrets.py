"""Re-encrypt every secret at rest (accounts.crypto.ENCRYPTED_FIELDS) under the newest FIELD_ENCRYPTION_KEYS key."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts.secret_rows import secrets_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (upstream credentials, webhook signing secrets) with the first key of "
        "FIELD_ENCRYPTION_KEYS. Put the new key first, keep the old ones after it, run this, then drop the old keys."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rotated, failed = secrets_rotate()
        self.stdout.write(self.style.SUCCESS(f"Re-encrypted {rotated} secret(s) under the newest key."))
        if failed:
            for row in failed:
                self.stderr.write(f"Does not decrypt under any configured key: {row}")
            raise CommandError(
                f"{len(failed)} secret(s) could not be re-encrypted: add the key they were made with to "
                "FIELD_ENCRYPTION_KEYS (after the new one) and run this again. Do not drop any key yet."
            )
