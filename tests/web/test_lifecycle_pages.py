"""The rental page's lifecycle panels: the removal countdown with move/extend/cancel, the connect panel and its
downloads, why members failed, what a terminate did, and the removal policy on the rent form and the API."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from api.keys import api_key_create
from rentals.models import ClusterMember, Rental, RentalEvent
from rentals.removal.policy import removal_policy_set
from tests.conftest import SSH_KEY
from tests.site.test_url_permissions import add_members
from tests.web import offer_fakes
from tests.web.offer_fakes import FABRIC, node

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready(rental: Rental) -> Rental:
    Rental.objects.filter(pk=rental.pk).update(status="ready", cluster_id="c-1", gpus_per_node=8)
    add_members(rental)
    rental.refresh_from_db()
    return rental


def page(client: Client, rental: Rental) -> str:
    return client.get(f"/rentals/{rental.public_id}/").content.decode()


def test_a_scheduled_removal_counts_down_with_its_utc_time(ready, alice, sam, client_for) -> None:
    at = (timezone.now() + timedelta(hours=3, minutes=12, seconds=30)).replace(microsecond=0)
    Rental.objects.filter(pk=ready.pk).update(removal_scheduled_at=at)
    html = page(client_for(alice), ready)
    assert "3 h 12 min" in html and f"{at:%Y-%m-%d %H:%M} UTC" in html
    assert f'data-countdown="{at.isoformat()}"' in html
    assert "Cancel scheduled removal" in html and "+4 h" in html
    support = page(client_for(sam), ready)
    assert "3 h 12 min" in support and "Cancel scheduled removal" not in support


def test_the_list_shows_the_countdown(ready, alice, client_for) -> None:
    Rental.objects.filter(pk=ready.pk).update(
        removal_scheduled_at=timezone.now() + timedelta(days=2, hours=1, minutes=30)
    )
    html = client_for(alice).get("/rentals/").content.decode()
    assert "removes in" in html and "2 d 1 h" in html


def test_extend_moves_the_time_and_cancel_clears_it(ready, alice, client_for) -> None:
    client = client_for(alice)
    client.post(f"/rentals/{ready.public_id}/schedule-removal/", {"hours": "2"})
    ready.refresh_from_db()
    first = ready.removal_scheduled_at
    response = client.post(f"/rentals/{ready.public_id}/schedule-removal/", {"extend_hours": "4"}, follow=True)
    ready.refresh_from_db()
    assert ready.removal_scheduled_at == first + timedelta(hours=4)
    assert "Every member will be removed at" in response.content.decode()
    response = client.post(f"/rentals/{ready.public_id}/cancel-removal/", follow=True)
    ready.refresh_from_db()
    assert ready.removal_scheduled_at is None
    html = response.content.decode()
    assert "Scheduled removal cancelled" in html and "No removal scheduled" in html
    assert list(ready.events.filter(data__action__isnull=False).values_list("data__action", flat=True)) == [
        "schedule_removal",
        "schedule_removal",
        "cancel_removal",
    ]


@pytest.mark.parametrize("value", ["0", "721", "-1", "2.5", "x", "9" * 50, ""])
def test_bad_hours_are_refused_with_a_message(ready, alice, client_for, value) -> None:
    response = client_for(alice).post(f"/rentals/{ready.public_id}/schedule-removal/", {"hours": value}, follow=True)
    assert "Enter a whole number of hours from 1 to 720." in response.content.decode()
    ready.refresh_from_db()
    assert ready.removal_scheduled_at is None


def test_the_connect_panel_links_jupyter_safely_and_lists_ports(ready, alice, client_for) -> None:
    ClusterMember.objects.filter(rental=ready, rank=1).update(jupyter_url="javascript:alert(1)")
    html = page(client_for(alice), ready)
    links = re.findall(r'<a href="([^"]+)" target="_blank" rel="noopener noreferrer"', html)
    assert links == ["http://192.0.2.1:38888/lab?token=t0"]
    assert "javascript:" not in html
    assert "8888 → 38888" in html and "22 → 22000" in html
    assert f"/rentals/{ready.public_id}/ssh-config/" in html and f"/rentals/{ready.public_id}/env/1/" in html
    assert 'class="wrap" data-testid="torchrun"' in html
    assert "allreduce_check.py" in html and "bus bandwidth" in html


def test_the_ssh_config_download(ready, alice, bob, client_for) -> None:
    response = client_for(alice).get(f"/rentals/{ready.public_id}/ssh-config/")
    assert response["Content-Disposition"] == 'attachment; filename="job.ssh_config"'
    body = response.content.decode()
    assert "Host job-rank0\n  HostName 192.0.2.1\n  User root\n  Port 22000\n" in body
    assert "Host job-rank1\n  HostName 192.0.2.2\n  User root\n  Port 22001\n" in body
    assert client_for(bob).get(f"/rentals/{ready.public_id}/ssh-config/").status_code == 404


def test_the_env_file_per_node(ready, alice, client_for) -> None:
    response = client_for(alice).get(f"/rentals/{ready.public_id}/env/1/")
    assert response["Content-Disposition"] == 'attachment; filename="job-rank1.env"'
    assert response.content.decode().splitlines() == [
        "MASTER_ADDR=10.42.0.1",
        "MASTER_PORT=29500",
        "NODE_RANK=1",
        "NNODES=2",
        "NPROC_PER_NODE=8",
        "WORLD_SIZE=16",
    ]
    assert client_for(alice).get(f"/rentals/{ready.public_id}/env/7/").status_code == 404


def test_a_bad_ssh_line_stored_earlier_never_reaches_the_config(ready, alice, client_for) -> None:
    ClusterMember.objects.filter(rental=ready, rank=1).update(ssh_command="ssh root@h -p 22; rm -rf /")
    body = client_for(alice).get(f"/rentals/{ready.public_id}/ssh-config/").content.decode()
    assert "job-rank0" in body and "job-rank1" not in body and "rm -rf" not in body


def test_the_per_member_result_of_a_terminate_is_shown(ready, alice, client_for) -> None:
    Rental.objects.filter(pk=ready.pk).update(status="terminating")
    RentalEvent.objects.create(
        rental=ready,
        kind=RentalEvent.Kind.MEMBER,
        message="Pod deletion started",
        data={
            "delete_accepted": True,
            "success": False,
            "pods": [
                {"pod_id": "pod-0", "success": True, "message": "Pod deletion started"},
                {"pod_id": "pod-1", "success": False, "message": "Pod is still being created"},
            ],
        },
    )
    html = page(client_for(alice), ready)
    assert "Removal, per member" in html and "Pod is still being created" in html and "not removed" in html


def test_the_rent_form_says_the_policy_and_applies_it(alice, olga, acme, client_for, monkeypatch) -> None:
    offer_fakes.install(monkeypatch, lambda credential: [node("n-1", "1.00"), node("n-2", "2.00")])
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    removal_policy_set(customer=acme, default_hours=6, max_hours=12, actor=olga)
    client = client_for(alice)
    html = client.get("/rent/", {"fabric": FABRIC}).content.decode()
    assert "empty means 6 hours, at most 12 hours" in html
    _key, secret = api_key_create(user=alice, name="k", scopes=["read", "rent"])
    body = {"fabric_id": FABRIC, "node_count": 2, "pod_name": "train-1", "ssh_public_keys": [SSH_KEY]}
    api = Client()
    answer = api.post("/api/v1/rentals", {**body, "termination_hours": 13}, content_type="application/json",
                      headers={"X-API-Key": secret})  # fmt: skip
    assert answer.status_code == 422 and answer.json()["validation_errors"][0]["field"] == "termination_hours"
    assert "at most 12 hours" in answer.json()["error"]["message"]
    answer = api.post("/api/v1/rentals", body, content_type="application/json", headers={"X-API-Key": secret})
    assert answer.status_code == 201
    assert b'"termination_hours":6' in Rental.objects.get().request_body


def test_the_policy_page_saves_for_operators_and_explains_bad_values(olga, sam, acme, client_for) -> None:
    url = f"/customers/{acme.pk}/removal-policy/"
    response = client_for(olga).post(url, {"default_hours": "30", "max_hours": "20"})
    assert "The default cannot be above the maximum." in response.content.decode()
    response = client_for(olga).post(url, {"default_hours": "0", "max_hours": "x"})
    assert response.status_code == 200 and "Enter a whole number." in response.content.decode()
    assert client_for(olga).post(url, {"default_hours": "8", "max_hours": "24"}).status_code == 302
    assert "default 8 h, maximum 24 h" in client_for(sam).get(url).content.decode()
    assert client_for(sam).post(url, {"default_hours": "1"}).status_code == 403


def test_the_ops_timeline_shows_the_countdown(ready, sam, client_for) -> None:
    Rental.objects.filter(pk=ready.pk).update(removal_scheduled_at=timezone.now() + timedelta(hours=5, minutes=30))
    html = client_for(sam).get(f"/ops/rentals/{ready.public_id}/").content.decode()
    assert "Scheduled removal" in html and "5 h 29 min" in html
