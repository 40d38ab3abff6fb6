"""Lium's cluster switch off: the fabric and rent pages say so and offer no Rent button; a submit is refused."""

from __future__ import annotations

import pytest

from rentals import tasks
from rentals.models import Rental
from tests.conftest import Simulator
from tests.web.test_rent_form import form_data

pytestmark = pytest.mark.django_db

SAYS_OFF = "Lium has switched cluster renting off"


@pytest.fixture
def switched_off(simulator: Simulator, credential) -> Simulator:  # type: ignore[no-untyped-def]
    simulator.config(multinode_clusters_enabled=False)
    tasks.cluster_switch_read()  # what beat does every LIUM_SWITCH_READ_SECONDS
    return simulator


def test_pages_offer_rent_buttons_while_the_switch_is_on(simulator: Simulator, alice, client_for) -> None:
    tasks.cluster_switch_read()
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    assert "Choose nodes" in client.get("/fabrics/").content.decode()
    page = client.get("/rent/", {"fabric": fabric_id}).content.decode()
    assert "Rent cluster" in page and SAYS_OFF not in page


def test_fabric_page_says_renting_is_off_and_offers_no_rent_button(switched_off: Simulator, alice, client_for) -> None:
    page = client_for(alice).get("/fabrics/").content.decode()
    assert SAYS_OFF in page
    assert "Choose nodes" not in page and "renting switched off" in page


def test_rent_page_says_so_has_no_button_and_a_submit_is_refused(switched_off: Simulator, alice, client_for) -> None:
    client = client_for(alice)
    fabric_id = switched_off.offers()[0]["fabric_id"]
    page = client.get("/rent/", {"fabric": fabric_id}).content.decode()
    assert SAYS_OFF in page and "Rent cluster</button>" not in page
    response = client.post(f"/rent/?fabric={fabric_id}", form_data(client, fabric_id))
    assert response.status_code == 200 and SAYS_OFF in response.content.decode()
    assert not Rental.objects.exists()
