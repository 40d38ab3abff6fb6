"""Member repair on the rental page: Reboot and Reset GPUs per running member for the customer and operators (none
for support), a confirm page, one request per click, the rebooting status, the reset's result, the ops timeline."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from rentals.enqueue import REPAIR_SEND
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.repair import services as repair
from tests.doubles import Enqueued
from tests.site.test_url_permissions import add_members

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready(rental: Rental) -> Rental:
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1", gpus_per_node=8)
    add_members(rental)
    rental.refresh_from_db()
    return rental


def page(client: Client, rental: Rental) -> str:
    return client.get(f"/rentals/{rental.public_id}/").content.decode()


def confirm_token(client: Client, url: str) -> str:
    html = client.get(url).content.decode()
    found = re.search(r'name="token" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def test_customers_and_operators_get_the_buttons_support_does_not(ready, alice, olga, sam, client_for) -> None:
    reboot = f"/rentals/{ready.public_id}/members/1/reboot/"
    for user in (alice, olga):
        html = page(client_for(user), ready)
        assert reboot in html and f"/rentals/{ready.public_id}/members/0/reset-gpu/" in html
    support = client_for(sam)
    assert reboot not in page(support, ready) and "Reset GPUs" not in page(support, ready)
    assert support.get(reboot).status_code == 403
    assert support.post(reboot, {"token": "t"}).status_code == 403
    assert not RentalEvent.objects.filter(data__has_key="repair_token").exists()


def test_another_customer_gets_404(ready, bob, client_for) -> None:
    client = client_for(bob)
    url = f"/rentals/{ready.public_id}/members/1/reset-gpu/"
    assert client.get(url).status_code == 404 and client.post(url, {"token": "t"}).status_code == 404


def test_a_double_click_on_the_confirm_page_asks_once(
    ready, alice, client_for, enqueued: Enqueued, django_capture_on_commit_callbacks
) -> None:
    client = client_for(alice)
    url = f"/rentals/{ready.public_id}/members/1/reboot/"
    token = confirm_token(client, url)
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(url, {"token": token, "reason": "hung NCCL"}, follow=True).content.decode()
        second = client.post(url, {"token": token, "reason": "hung NCCL"}, follow=True).content.decode()
    assert "Reboot of rank 1 asked" in first and "already asked by this click" in second
    [event] = RentalEvent.objects.filter(data__repair=repair.REBOOT)
    assert (event.actor, event.data["rank"], event.data["reason"]) == (alice, 1, "hung NCCL")
    assert [args for args, _ in enqueued.of(REPAIR_SEND)] == [(event.pk,)]
    # The page lists the request with who asked it.
    assert 'data-testid="repairs"' in second and "asked, about to be sent" in second


def test_a_rebooting_member_shows_rebooting_and_no_buttons(ready, alice, client_for) -> None:
    ClusterMember.objects.filter(rental=ready, rank=1).update(status="REBOOT_PENDING")
    html = page(client_for(alice), ready)
    assert ">rebooting<" in html
    assert f"/rentals/{ready.public_id}/members/1/reboot/" not in html
    response = client_for(alice).get(f"/rentals/{ready.public_id}/members/1/reboot/", follow=True)
    assert "Rank 1 is rebooting, not running" in response.content.decode()


def test_bad_input_is_refused_with_a_clear_message(ready, alice, client_for) -> None:
    client = client_for(alice)
    html = client.get(f"/rentals/{ready.public_id}/members/5/reboot/", follow=True).content.decode()
    assert "This cluster has no member of rank 5: its members are ranks 0, 1." in html
    html = client.post(f"/rentals/{ready.public_id}/members/1/reset-gpu/", {}, follow=True).content.decode()
    assert "This form has expired" in html
    assert client.get(f"/rentals/{ready.public_id}/members/-1/reboot/").status_code == 404


def test_the_reset_result_shows_per_gpu_on_the_page_and_the_ops_timeline(ready, alice, olga, client_for) -> None:
    event, _ = repair.member_repair_ask(rental=ready, rank=0, action=repair.RESET_GPU, actor=olga, reason="ECC")
    gpus = [
        {"index": 0, "uuid": "GPU-aaa", "result": "reset", "detail": "GPU reset"},
        {"index": 1, "uuid": "GPU-bbb", "result": "failed", "detail": "did not come back"},
    ]
    RentalEvent.objects.filter(pk=event.pk).update(
        data={**event.data, "state": "failed", "gpus": gpus, "outcome": "GPU reset of rank 0 failed."}
    )
    html = page(client_for(alice), ready)
    assert 'data-testid="repair-gpus"' in html and "GPU-bbb" in html and "did not come back" in html
    timeline = client_for(olga).get(f"/ops/rentals/{ready.public_id}/").content.decode()
    assert "GPU reset of rank 0 (pod pod-0) asked by olga. Reason: ECC" in timeline
