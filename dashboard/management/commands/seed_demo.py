"""Create the demo users, customers, the simulator credential and a budget (embedded default only).

It lives in the project package because it seeds several apps (accounts, billing).
"""

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from accounts.models import Customer, Membership, UpstreamCredential
from accounts.roles import OPERATOR_GROUP, SUPPORT_GROUP
from billing.models import CustomerAdmin, CustomerBudget


class Command(BaseCommand):
    help = "Create demo users (alice, bob, sam, olga, admin), customers and the simulator credential."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("Demo data is for the embedded default only, never with DASHBOARD_ENV=production.")
        credential, _ = UpstreamCredential.objects.get_or_create(
            name="Local simulator",
            defaults={"scheme": UpstreamCredential.Scheme.API_KEY, "secret_encrypted": "", "secret_last4": ""},
        )
        credential.base_url = settings.LIUM_BASE_URL
        credential.set_secret(settings.SIMULATOR_API_KEY)
        credential.save()
        acme, _ = Customer.objects.update_or_create(
            name="Acme Research", defaults={"customer_ref": "acme", "default_credential": credential}
        )
        globex, _ = Customer.objects.update_or_create(
            name="Globex", defaults={"customer_ref": "globex", "default_credential": credential}
        )
        support, _ = Group.objects.get_or_create(name=SUPPORT_GROUP)
        operator, _ = Group.objects.get_or_create(name=OPERATOR_GROUP)
        people = [
            ("alice", "alice@acme.example", acme, None, False),
            ("bob", "bob@globex.example", globex, None, False),
            ("sam", "sam@support.example", None, support, False),
            ("olga", "olga@ops.example", None, operator, False),
            ("admin", "admin@ops.example", None, None, True),
        ]
        for username, email, customer, group, superuser in people:
            user, _ = User.objects.get_or_create(username=username, defaults={"email": email})
            user.email = email
            user.is_superuser = user.is_staff = superuser
            user.set_password(settings.DEMO_PASSWORD)
            user.save()
            if customer is not None:
                membership, _ = Membership.objects.get_or_create(user=user, customer=customer)
                if username == "alice":  # Acme's admin: invites teammates and may lower Acme's budget
                    CustomerAdmin.objects.get_or_create(membership=membership)
            if group is not None:
                user.groups.add(group)
        for customer in (acme, globex):
            CustomerBudget.objects.get_or_create(customer=customer, defaults={"monthly_budget_usd": 5000})
        self.stdout.write(
            self.style.SUCCESS(
                "Demo data ready: alice (Acme Research, its admin), bob (Globex), sam (support), olga (operator), "
                "admin; each customer has a $5000 monthly budget."
            )
        )
