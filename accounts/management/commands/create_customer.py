"""Create or update a customer and the Lium credential its rentals go out with (production-safe)."""

import os
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.models import Customer, UpstreamCredential, customer_ref_validator


class Command(BaseCommand):
    help = (
        "Create or update a customer and its default Lium credential. The secret is read from the environment "
        "variable named by --credential-secret-env, never from the command line (where `ps` would show it)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the customer's name, e.g. 'Acme Research'")
        parser.add_argument("--ref", required=True, help="its customer ref, sent upstream as X-Customer-Ref")
        parser.add_argument(
            "--credential-secret-env",
            required=True,
            metavar="VAR",
            help="environment variable holding the Lium API key",
        )
        parser.add_argument("--credential-name", help="the credential's name (default: '<name> key')")
        parser.add_argument("--base-url", default="", help="the credential's Lium base URL (default LIUM_BASE_URL)")
        parser.add_argument("--bearer", action="store_true", help="send the secret as a bearer token, not X-API-Key")

    def handle(self, *args: Any, **options: Any) -> None:
        secret = os.environ.get(options["credential_secret_env"], "")
        if not secret:
            raise CommandError(f"The environment variable {options['credential_secret_env']} is empty or unset.")
        try:
            customer_ref_validator(options["ref"])
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        name = options["name"].strip()
        try:
            Customer._meta.get_field("name").clean(name, None)  # required, and short enough for its column
        except ValidationError as exc:
            raise CommandError(f"The customer name: {' '.join(exc.messages)}") from exc
        scheme = UpstreamCredential.Scheme.BEARER if options["bearer"] else UpstreamCredential.Scheme.API_KEY
        with transaction.atomic():
            credential = UpstreamCredential.objects.filter(name=options["credential_name"] or f"{name} key").first()
            credential = credential or UpstreamCredential(name=options["credential_name"] or f"{name} key")
            credential.scheme = scheme
            credential.base_url = options["base_url"]
            try:
                credential.set_secret(secret)
                credential.full_clean()
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from exc
            credential.save()
            customer, created = Customer.objects.update_or_create(
                name=name, defaults={"customer_ref": options["ref"], "default_credential": credential}
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"{'Created' if created else 'Updated'} customer {customer.name} ({customer.customer_ref}) "
                f"with credential {credential}."
            )
        )
