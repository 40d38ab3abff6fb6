"""`manage.py create_api_key --user USER --scopes read,rent,manage` prints a new key, once."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from api.keys import api_key_authenticate
from api.models import ApiKey

pytestmark = pytest.mark.django_db


def test_it_prints_a_working_key_with_the_scopes(alice) -> None:
    out, err = StringIO(), StringIO()
    call_command("create_api_key", user="alice", scopes="read,rent,manage", stdout=out, stderr=err)
    text = out.getvalue().strip()
    key = api_key_authenticate(raw=text)
    assert isinstance(key, ApiKey) and key.user == alice and key.scopes == ["read", "rent", "manage"]
    assert "shown only this once" in err.getvalue() and text not in err.getvalue()


@pytest.mark.parametrize(
    ("options", "message"),
    [({"user": "nobody", "scopes": "read"}, "No active user"), ({"user": "alice", "scopes": "admin"}, "scopes")],
)
def test_it_refuses_an_unknown_user_or_scope(alice, options, message) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("create_api_key", **options, stdout=StringIO(), stderr=StringIO())
    assert not ApiKey.objects.exists()


def test_it_refuses_a_name_longer_than_a_key_name_can_be(alice) -> None:
    # The profile form bounds the name; the command did not, and PostgreSQL refused the row with a traceback.
    with pytest.raises(CommandError, match="at most 100 characters"):
        call_command("create_api_key", user="alice", name="n" * 101, stdout=StringIO(), stderr=StringIO())
    assert not ApiKey.objects.exists()
