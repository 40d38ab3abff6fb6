"""The bench signs its people in through the real sign-in form; when that form changes, every figure is lost."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from bench.context import PASSWORD
from bench.people import login

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_bench_signs_in_through_the_dashboards_own_form(live_server: Any) -> None:
    User.objects.create_user("bench-alice", "alice@bench.invalid", PASSWORD)
    client = login(live_server.url, "bench-alice")
    page = client.get("/accounts/email/")  # any page that needs a signed-in user
    assert page.status_code == 200, "the bench's client is signed in"
