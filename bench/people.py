"""The bench's people: a customer with a user who rents, a superuser who supports, both logged in."""

from __future__ import annotations

import httpx
from django.contrib.auth.models import User

from accounts.models import Customer, Membership, UpstreamCredential
from bench.context import PASSWORD, People, Stack
from rentals import offers
from scripts.harness import SIM_KEY


def create_people(stack: Stack) -> People:
    """Create the credential, customer and users, and log both users in to gunicorn."""
    credential = UpstreamCredential(name="bench", base_url=f"{stack.sim.url}/api")
    credential.set_secret(SIM_KEY)
    credential.save()
    customer = Customer.objects.create(name="Bench Research", customer_ref="bench", default_credential=credential)
    alice = User.objects.create_user("bench-alice", "alice@bench.invalid", PASSWORD)
    Membership.objects.create(user=alice, customer=customer)
    User.objects.create_superuser("bench-admin", "admin@bench.invalid", PASSWORD)
    return People(
        credential=credential,
        customer=customer,
        alice=alice,
        user_http=login(stack.web, "bench-alice"),
        staff_http=login(stack.web, "bench-admin"),
        template_id=offers.cluster_templates(credential=credential)[0].id,
    )


def login(web: str, username: str) -> httpx.Client:
    """Return an HTTP client logged in to `web` as `username`, through the login form."""
    client = httpx.Client(base_url=web, timeout=30.0)
    client.get("/accounts/login/")
    response = client.post(
        "/accounts/login/",
        data={
            "login": username,  # allauth's sign-in form (username or e-mail)
            "password": PASSWORD,
            "csrfmiddlewaretoken": client.cookies.get("csrftoken", ""),
        },
    )
    if response.status_code != 302:
        raise RuntimeError(f"login as {username} failed: {response.status_code}")
    return client


def cookie_header(client: httpx.Client) -> str:
    """Return the client's cookies as one Cookie header value."""
    return "; ".join(f"{name}={value}" for name, value in client.cookies.items())
