"""End to end: a cluster rented, run and removed through the real worker and the simulator costs, per pod, what
the simulator's ledger debited (to the cent): the usage API says `confirmed`; a statement skew of that day shows
on the ops page, in one operator e-mail, and takes `confirmed` away."""

from __future__ import annotations

import time
from datetime import UTC

import pytest
from django.core import mail
from django.utils import timezone

from api.keys import api_key_create
from billing.models import OperatorNotice
from billing.operator_notices import notices_send
from billing.statement import statement_compare
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.conftest import Simulator
from tests.e2e.test_rent_flow import cheapest_pair_form, poll_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_status(rental: Rental, status: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rental.refresh_from_db()
        if rental.status == status:
            return
        time.sleep(0.3)
    raise AssertionError(f"rental stayed {rental.status}, never {status}")


def usage_line(client, user) -> dict:  # type: ignore[no-untyped-def]
    _key, raw = api_key_create(user=user, name=f"usage-{time.monotonic_ns()}", scopes=["read"])
    body = client.get("/api/v1/usage", headers={"X-API-Key": raw}).json()
    [line] = body["lines"]
    return line


def test_our_cost_per_pod_matches_the_simulators_statement_and_a_skew_is_caught(
    simulator: Simulator, celery_worker_process, alice, olga, credential, client_for
) -> None:
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    response = client.post(f"/rent/?fabric={fabric_id}", cheapest_pair_form(client, fabric_id))
    assert response.status_code == 302
    rental = Rental.objects.get()
    poll_until(client, f"{response['Location']}progress/", {"ready"})
    time.sleep(2)  # let it bill a little
    assert client.post(f"/rentals/{rental.public_id}/terminate/").status_code == 302
    wait_status(rental, RentalStatus.TERMINATED)
    today = timezone.now().astimezone(UTC).date()

    result = statement_compare(credential=credential, days=[today])

    assert (result.error, result.lines, result.disagreeing) == ("", 2, 0)
    line = usage_line(client, alice)
    assert line["confirmed"] is True and line["estimate"] is False and line["cost_usd"] != "0.00"

    simulator.http.post("/_sim/billing", json={"statement_skew_usd": 1.5, "day": today.isoformat()}).raise_for_status()
    result = statement_compare(credential=credential, days=[today])
    notices_send()

    assert result.disagreeing == 2
    assert usage_line(client, alice)["confirmed"] is False
    [notice] = OperatorNotice.objects.all()
    assert notice.kind == "statement.mismatch" and today.isoformat() in notice.subject
    assert [message.to for message in mail.outbox] == [[olga.email]]
    page = client_for(olga).get("/ops/").content.decode()
    assert page.count('data-pod="') == 2 and 'data-testid="statement-disagreements"' in page
