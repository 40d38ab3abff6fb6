"""One invitation link opened in several tabs at once, for real: threads on their own connections, committing.

Exactly one sign-up joins; the others are refused and leave no account behind (the account is created in the
claim's transaction).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection

from accounts.models import Membership
from billing.invitations import invitation_accept, invitation_create

TABS = 4


@pytest.mark.django_db(transaction=True)
def test_a_link_signed_up_with_in_four_tabs_at_once_makes_one_account(olga, acme) -> None:
    token = invitation_create(customer=acme, created_by=olga).token
    start = threading.Barrier(TABS)

    def tab(number: int) -> str:
        try:
            start.wait()
            invitation_accept(token=token, signup=lambda: User.objects.create_user(f"tab{number}", password="x"))
            return "joined"
        except ValidationError as exc:
            return exc.code or "refused"
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=TABS) as pool:
        outcomes = list(pool.map(tab, range(TABS)))
    assert outcomes.count("joined") == 1, outcomes
    assert User.objects.filter(username__startswith="tab").count() == 1
    assert Membership.objects.filter(customer=acme, user__username__startswith="tab").count() == 1
