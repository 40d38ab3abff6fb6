"""Re-encrypt every upstream secret under the newest FIELD_ENCRYPTION_KEYS key."""

from typing import Any

from django.core.management.base import BaseCommand

from accounts.crypto import rotate_secret
from accounts.models import UpstreamCredential


class Command(BaseCommand):
    help = (
        "Re-encrypt all upstream credentials with the first key of FIELD_ENCRYPTION_KEYS. Put the new key "
        "first, keep the old ones after it, run this, then drop the old keys."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count = 0
        for credential in UpstreamCredential.objects.all():
            credential.secret_encrypted = rotate_secret(credential.secret_encrypted)
            credential.save(update_fields=["secret_encrypted"])
            count += 1
        self.stdout.write(self.style.SUCCESS(f"Re-encrypted {count} credential(s) under the newest key."))
