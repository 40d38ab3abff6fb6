"""Name every stored secret that the configured FIELD_ENCRYPTION_KEYS do not open (exit 1 if any)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts.secret_rows import secrets_not_under_newest_key, secrets_undecryptable


class Command(BaseCommand):
    help = (
        "List the rows (model, pk, field) whose secret no key of FIELD_ENCRYPTION_KEYS decrypts, and those still "
        "needing an older key. Run it after rotating and before dropping an old key."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        broken = secrets_undecryptable()
        for row in broken:
            self.stderr.write(f"Does not decrypt under any configured key: {row}")
        if broken:
            raise CommandError(f"{len(broken)} secret(s) do not decrypt with FIELD_ENCRYPTION_KEYS.")
        stale = secrets_not_under_newest_key()
        for row in stale:
            self.stdout.write(f"Still needs an older key (run rotate_secrets): {row}")
        self.stdout.write(self.style.SUCCESS("Every stored secret decrypts with FIELD_ENCRYPTION_KEYS."))
