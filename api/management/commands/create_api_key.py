"""Create an API key for a user and print it once: `manage.py create_api_key --user alice --scopes read,rent`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.keys import ALL_SCOPES, api_key_create


class Command(BaseCommand):
    help = "Create an API key for a user and print it (the only time it can be read)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="The username the key acts as.")
        parser.add_argument(
            "--scopes", default="read", help=f"Comma-separated, among {','.join(ALL_SCOPES)} (default: read)."
        )
        parser.add_argument("--name", default="", help="A name to tell the key apart (default: 'cli <scopes>').")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["user"]).first()
        if user is None or not user.is_active:
            raise CommandError(f"No active user named {options['user']!r}.")
        scopes = [scope.strip() for scope in options["scopes"].split(",") if scope.strip()]
        name = options["name"] or f"cli {','.join(scopes)}"
        try:
            _key, text = api_key_create(user=user, name=name, scopes=scopes)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        # The key alone on stdout, so a script can capture it; how to use it on stderr.
        self.stdout.write(text)
        self.stderr.write(f"Key for {user.username} with scopes {', '.join(scopes)}. It is shown only this once.")
