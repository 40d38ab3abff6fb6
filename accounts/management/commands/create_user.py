"""Create or update a login: a customer's member, support, an operator or a superuser (production-safe)."""

import os
from typing import Any

from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.models import Customer, Membership
from accounts.roles import OPERATOR_GROUP, SUPPORT_GROUP


class Command(BaseCommand):
    help = (
        "Create or update a user and give it a role. The password is read from the environment variable named "
        "by --password-env, never from the command line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password-env", required=True, metavar="VAR", help="variable holding the password")
        parser.add_argument("--email", default="")
        role = parser.add_mutually_exclusive_group(required=True)
        role.add_argument("--customer", metavar="REF", help="make the user a member of the customer with this ref")
        role.add_argument("--operator", action="store_true", help="acts on any rental, rents for any customer")
        role.add_argument("--support", action="store_true", help="reads every rental, changes nothing")
        role.add_argument("--superuser", action="store_true", help="every right, and the Django admin")

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get(options["password_env"], "")
        if not password:
            raise CommandError(f"The environment variable {options['password_env']} is empty or unset.")
        customer = None
        if options["customer"]:
            customer = Customer.objects.filter(customer_ref=options["customer"]).first()
            if customer is None:
                raise CommandError(f"No customer has the ref {options['customer']!r} (create_customer makes one).")
        with transaction.atomic():
            user = User.objects.filter(username=options["username"]).first() or User(username=options["username"])
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from exc
            user.email = options["email"] or user.email
            user.is_superuser = user.is_staff = bool(options["superuser"])
            user.set_password(password)
            user.save()
            if customer is not None:
                Membership.objects.get_or_create(user=user, customer=customer)
            for flag, group_name in (("operator", OPERATOR_GROUP), ("support", SUPPORT_GROUP)):
                if options[flag]:
                    user.groups.add(Group.objects.get_or_create(name=group_name)[0])
        role = (
            f"member of {customer.name}"
            if customer
            else next(name for name in ("operator", "support", "superuser") if options[name])
        )
        self.stdout.write(self.style.SUCCESS(f"User {user.username} ready ({role})."))
