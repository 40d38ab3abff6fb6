"""Bad input found by the page fuzzer (tests/web/test_fuzz_pages.py) is refused or ignored, never a 500."""

from __future__ import annotations

import pytest

from rentals.models import Rental, RentalEvent
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db


@pytest.fixture
def offers(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_fakes.install(monkeypatch, lambda credential: [node("n-1", "1.00"), node("n-2", "2.00")])


def test_a_rent_link_with_a_very_long_cheapest_number_shows_the_form(offers, alice, client_for) -> None:
    response = client_for(alice).get("/rent/", {"fabric": FABRIC, "cheapest": "9" * 5000})
    assert response.status_code == 200
    assert 'name="executor_ids" value="n-1"' in response.content.decode()


def test_a_rent_link_with_a_huge_cheapest_number_selects_every_node(offers, alice, client_for) -> None:
    html = client_for(alice).get("/rent/", {"fabric": FABRIC, "cheapest": "9" * 40}).content.decode()
    assert html.count("checked") >= 2


def test_a_ref_filter_with_a_nul_byte_finds_nothing(rental, alice, client_for) -> None:
    # PostgreSQL refuses NUL in a query parameter; the filter must not reach the database with one.
    response = client_for(alice).get("/rentals/", {"ref": "acme\x00"})
    assert response.status_code == 200
    assert str(rental.public_id) not in response.content.decode()


@pytest.mark.parametrize("action", ["terminate", "cancel"])
def test_a_reason_with_nul_bytes_is_recorded_without_them(rental, alice, client_for, action: str) -> None:
    if action == "terminate":
        Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1")
    reason = "oops\x00 done" + "x" * 5000
    response = client_for(alice).post(f"/rentals/{rental.public_id}/{action}/", {"reason": reason})
    assert response.status_code == 302
    event = RentalEvent.objects.filter(rental=rental).order_by("-id").first()
    assert event is not None
    assert "oops done" in event.message
    assert "\x00" not in event.message
    assert len(event.message) < 1100, "a reason is kept to a readable length"


@pytest.mark.parametrize("persona", ["alice", "olga"])
@pytest.mark.parametrize("wanted", [10**30, -(10**30)])
def test_a_huge_saved_key_id_is_refused_with_a_message(offers, acme, persona, wanted, client_for, request, monkeypatch):  # type: ignore[no-untyped-def]
    """SQLite cannot take an integer past 64 bits: such an id once answered 500 ("Python int too large")."""
    from accounts.models import SshPublicKey
    from tests.conftest import SSH_KEY
    from tests.web.test_rent_form import form_data

    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    user = request.getfixturevalue(persona)
    key = SshPublicKey.objects.create(user=user, name="laptop", public_key=SSH_KEY)
    client = client_for(user)
    response = client.post(f"/rent/?fabric={FABRIC}", form_data(client, FABRIC, saved_keys=[key.pk, wanted]))
    assert response.status_code == 200, "the form is shown again"
    assert f"{wanted} is not one of your saved keys" in response.content.decode()
    assert not Rental.objects.exists()
    ordered = client.post(f"/rent/?fabric={FABRIC}", form_data(client, FABRIC, saved_keys=[key.pk]))
    assert ordered.status_code == 302, "the same form with only the real key orders"
