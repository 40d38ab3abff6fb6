"""One keyset cursor (`rentals.cursors`) pages "my rentals" and the API alike."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from rentals.cursors import InvalidCursor, cursor_decode
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from tests.conftest import SSH_KEY

pytestmark = pytest.mark.django_db


def test_the_pages_older_link_continues_the_api_list_where_the_page_ended(alice, acme, client_for, monkeypatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    monkeypatch.setattr("rentals.web.views.RENTALS_PER_PAGE", 3)
    for number in range(5):
        order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name=f"job-{number}", public_keys=[SSH_KEY])
        rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    # Equal creation times are ordered by id: the cursor carries both.
    Rental.objects.update(created_at=timezone.now())
    page = client_for(alice).get("/rentals/").content.decode()
    link = re.search(r'href="\?before=([^&"]+)', page)
    assert link is not None, "an Older link"
    older = unquote(link.group(1))

    _key, secret = api_key_create(user=alice, name="k", scopes=["read"])
    headers = {"X-API-Key": secret}
    answer = Client().get("/api/v1/rentals", {"cursor": older}, headers=headers).json()
    assert [item["pod_name"] for item in answer["items"]] == ["job-1", "job-0"]
    first = Client().get("/api/v1/rentals", {"limit": 3}, headers=headers).json()
    assert first["next_cursor"] == older, "the API's next_cursor is the page's Older link"


@pytest.mark.parametrize("cursor", ["", "!!", "WzFd", "WyJ4IiwgMV0", "WyIyMDI2LTAxLTAxVDAwOjAwOjAwIiwgMV0"])
def test_a_cursor_not_made_here_is_refused_with_a_clear_error(cursor: str) -> None:
    with pytest.raises(InvalidCursor, match="not valid"):
        cursor_decode(cursor)
