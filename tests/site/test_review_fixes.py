"""Defects found in review, each pinned by what a user (or attacker) would have seen."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from ops.admin_credentials import UpstreamCredentialForm
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.removal.deletion import rental_delete_cluster
from rentals.services import rental_submit, rental_terminate
from tests.conftest import SSH_KEY

pytestmark = pytest.mark.django_db


@pytest.fixture
def rental(alice, acme, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name="job", public_keys=[SSH_KEY])
    return rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")


def test_terminate_waits_for_the_cluster_id_instead_of_marking_a_live_cluster_terminated(rental, alice) -> None:
    Rental.objects.filter(pk=rental.pk).update(status="rented", pod_ids=["p1", "p2"], cluster_id="")
    rental.refresh_from_db()
    with pytest.raises(ValidationError, match="not known yet"):
        rental_terminate(rental=rental, actor=alice)
    Rental.objects.filter(pk=rental.pk).update(status="terminating")
    assert rental_delete_cluster(rental_id=rental.pk) == "retry", "no DELETE /clusters/ with an empty id"
    rental.refresh_from_db()
    assert rental.status == "terminating"


def new_secret_form(credential) -> UpstreamCredentialForm:  # type: ignore[no-untyped-def]
    """The admin's change form for `credential`, giving it another account's key."""
    data = {
        "name": "main",
        "scheme": "api_key",
        "base_url": credential.base_url,
        "customer_ref": "",
        "active": "on",
        "secret": "another-accounts-key",
    }
    return UpstreamCredentialForm(data=data, instance=credential)


def test_the_account_behind_open_rentals_cannot_change(rental, credential) -> None:
    form = new_secret_form(credential)
    assert not form.is_valid()
    assert "could rent them twice" in str(form.errors)
    Rental.objects.filter(pk=rental.pk).update(status="terminated")
    assert new_secret_form(credential).is_valid(), "with every rental settled the secret may change"


@pytest.mark.parametrize(
    "url",
    [
        "/rentals/?before=0001-01-01T00:00:00%2B14:00_1",
        "/rentals/?before=9999-12-31T23:59:59-14:00_1",
        "/rentals/?before=2026-01-01T00:00:00_1",
        "/rent/?fabric=x&cheapest=%C2%B2",
    ],
)
def test_odd_query_strings_never_give_a_500(url: str, alice, client_for) -> None:
    assert client_for(alice).get(url).status_code < 500


@pytest.mark.parametrize(
    "url",
    [
        "/ops/usage/?end=9999-12-31",
        "/ops/usage.csv?end=9999-12-31",
        "/ops/audit/?until=9999-12-31",
        "/ops/usage/?end=0001-01-02",
    ],
)
def test_out_of_range_report_dates_never_give_a_500(url: str, olga, client_for) -> None:
    assert client_for(olga).get(url).status_code == 200
