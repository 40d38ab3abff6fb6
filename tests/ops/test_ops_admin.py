"""The Django admin as a second console: its actions go through the same services."""

from __future__ import annotations

import pytest

from rentals.models import RentalEvent
from rentals.states import RentalStatus
from tests.conftest import _user

pytestmark = pytest.mark.django_db


def test_a_superuser_cancels_a_queued_rental_from_the_admin(make_rental, client_for) -> None:
    admin_user = _user("root", superuser=True)
    queued, ready = make_rental(status=RentalStatus.QUEUED), make_rental(status=RentalStatus.READY, cluster_id="cl-1")
    response = client_for(admin_user).post(
        "/admin/rentals/rental/",
        {"action": "cancel_rentals", "_selected_action": [queued.pk, ready.pk]},
        follow=True,
    )
    assert "Cancelled 1 of 2 rentals" in response.content.decode()
    queued.refresh_from_db(), ready.refresh_from_db()
    assert (queued.status, ready.status) == (RentalStatus.CANCELLED, RentalStatus.READY)
    assert RentalEvent.objects.filter(rental=queued, kind="staff_action", actor=admin_user).exists()


def test_the_rental_changelist_runs_a_fixed_number_of_queries(make_rental, client_for, django_assert_max_num_queries):  # type: ignore[no-untyped-def]
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(_user("root", superuser=True))
    make_rental()
    client.get("/admin/rentals/rental/")
    with CaptureQueriesContext(connection) as few:
        assert client.get("/admin/rentals/rental/").status_code == 200
    for _ in range(30):
        make_rental()
    with django_assert_max_num_queries(len(few)):
        assert client.get("/admin/rentals/rental/").status_code == 200


def test_an_admin_action_and_an_ops_action_leave_the_same_timeline_and_audit_entry(
    make_rental, olga, client_for
) -> None:
    admin_user = _user("root", superuser=True)
    by_admin, by_ops = make_rental(status=RentalStatus.QUEUED), make_rental(status=RentalStatus.QUEUED)
    client_for(admin_user).post(
        "/admin/rentals/rental/", {"action": "cancel_rentals", "_selected_action": [by_admin.pk]}
    )
    client_for(olga).post(f"/ops/rentals/{by_ops.public_id}/cancel/", {"confirm": "on", "reason": "customer asked"})

    entries = {}
    for rental, actor in ((by_admin, admin_user), (by_ops, olga)):
        [entry] = RentalEvent.objects.filter(rental=rental, kind="staff_action")
        assert entry.actor == actor and entry.to_status == RentalStatus.CANCELLED, (
            "the state change is the staff action"
        )
        entries[rental.pk] = entry
    admin_entry, ops_entry = entries[by_admin.pk], entries[by_ops.pk]
    assert admin_entry.data == {"action": "cancel", "reason": "Via the Django admin."}
    assert ops_entry.data == {"action": "cancel", "reason": "customer asked"}
    audit = client_for(olga).get("/ops/audit/", {"kind": "staff_action"}).content.decode()
    assert "Via the Django admin." in audit and "customer asked" in audit


def test_an_operator_cancelling_their_own_rental_leaves_one_entry(make_rental, olga, client_for) -> None:
    rental = make_rental(status=RentalStatus.QUEUED, created_by=olga)
    client_for(olga).post(f"/ops/rentals/{rental.public_id}/cancel/", {"confirm": "on", "reason": "my mistake"})
    [entry] = RentalEvent.objects.filter(rental=rental).exclude(kind="created")
    assert (entry.kind, entry.to_status, entry.data["reason"]) == ("staff_action", RentalStatus.CANCELLED, "my mistake")


def test_a_change_on_the_customer_pages_is_a_staff_action_when_an_operator_makes_it(
    make_rental, alice, carol, olga, client_for
) -> None:
    for user, kind in ((alice, "state"), (carol, "state"), (olga, "staff_action")):
        rental = make_rental(status=RentalStatus.QUEUED)
        client_for(user).post(f"/rentals/{rental.public_id}/cancel/", {"reason": "not needed"})
        event = rental.events.get(to_status=RentalStatus.CANCELLED)
        assert (event.kind, event.actor) == (kind, user)

    ready = make_rental(status=RentalStatus.READY, cluster_id="cl-1", pod_ids=["p-1", "p-2"])
    client_for(olga).post(f"/rentals/{ready.public_id}/schedule-removal/", {"hours": "2"})
    event = ready.events.get(kind="staff_action")
    assert event.actor == olga and event.data["action"] == "schedule_removal" and event.data["removal_scheduled_at"]


@pytest.mark.parametrize("scopes", ['["read", "x\\u0000y"]', '{"read": 1}', '["root"]', '"read"'])
def test_an_api_keys_scopes_in_the_admin_are_a_list_of_known_scopes(alice, client_for, scopes: str) -> None:
    """The admin's JSON box took anything: a NUL (PostgreSQL's jsonb refuses it: a 500), a dict, unknown names."""
    from api.keys import api_key_create

    key = api_key_create(user=alice, name="ci", scopes=["read"])[0]
    change = {
        "user": alice.pk,
        "name": "ci",
        **dict.fromkeys(["expires_at_0", "expires_at_1", "revoked_at_0", "revoked_at_1"], ""),
    }
    client = client_for(_user("root", superuser=True))
    response = client.post(f"/admin/api/apikey/{key.pk}/change/", {**change, "scopes": scopes})
    assert response.status_code == 200, "the form is shown again"
    assert "Give the scopes as a list of: read, rent, manage" in response.content.decode()
    key.refresh_from_db()
    assert key.scopes == ["read"]
    saved = client.post(f"/admin/api/apikey/{key.pk}/change/", {**change, "scopes": '["rent", "read"]'})
    assert saved.status_code == 302
    key.refresh_from_db()
    assert key.scopes == ["read", "rent"]


@pytest.mark.parametrize(
    "url",
    [
        "/admin/accounts/upstreamcredential/?scheme__exact=a%00b",
        "/admin/rentals/rental/?status__exact=rea%00dy",
        "/admin/rentals/rentalevent/?kind__exact=%00",
    ],
)
def test_an_admin_list_filter_with_a_nul_character_is_refused_with_a_message(url: str, client_for) -> None:
    # The admin's list filters pass their values straight to the database, and PostgreSQL refuses a NUL in text.
    response = client_for(_user("root", superuser=True)).get(url)
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()
