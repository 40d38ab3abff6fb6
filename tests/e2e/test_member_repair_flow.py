"""End to end (issue 27 item 4, as it will be checked): Reboot member and Reset GPUs, each clicked twice with the
same form, reach the simulator once per click through the real worker, and the member runs again; the reset's
per-GPU result shows on the rental page."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from django.test import Client

from rentals.models import ClusterMember, Rental, RentalEvent
from tests.conftest import Simulator
from tests.e2e.test_rent_flow import cheapest_pair_form, poll_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_until(done: Callable[[], bool], what: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.3)
    raise AssertionError(f"never: {what}")


def double_click(client: Client, url: str) -> None:
    """Open the confirm page, then submit its form twice (the same click token), as a double click does."""
    token = re.search(r'name="token" value="([^"]+)"', client.get(url).content.decode())
    assert token is not None
    for _ in range(2):
        assert client.post(url, {"token": token.group(1)}).status_code == 302


def calls(simulator: Simulator, route: str, pod_id: str) -> list[dict]:
    return [e for e in simulator.requests(route) if e["method"] == "POST" and f"/pods/{pod_id}/" in e["path"]]


def test_reboot_and_reset_gpus_reach_lium_once_per_click_and_the_member_runs_again(
    simulator: Simulator, celery_worker_process, alice, client_for
) -> None:
    client = client_for(alice)
    fabric_id = simulator.offers()[0]["fabric_id"]
    response = client.post(f"/rent/?fabric={fabric_id}", cheapest_pair_form(client, fabric_id))
    rental = Rental.objects.get()
    poll_until(client, f"{response['Location']}progress/", {"ready"})
    member = ClusterMember.objects.get(rental=rental, rank=1)

    double_click(client, f"/rentals/{rental.public_id}/members/1/reboot/")
    wait_until(
        lambda: RentalEvent.objects.filter(rental=rental, message="Rank 1 runs again after its reboot.").exists(),
        "the rebooted member was seen running again",
    )
    member.refresh_from_db()
    assert member.status == "RUNNING"
    assert len(calls(simulator, "reboot", member.pod_id)) == 1

    double_click(client, f"/rentals/{rental.public_id}/members/1/reset-gpu/")
    reset = RentalEvent.objects.get(rental=rental, data__repair="reset_gpu")

    def finished() -> bool:
        reset.refresh_from_db()
        return reset.data["state"] == "done"

    wait_until(finished, "the GPU reset's result came back")
    assert len(calls(simulator, "reset-gpu", member.pod_id)) == 1
    page = client.get(f"/rentals/{rental.public_id}/").content.decode()
    assert page.count("<td>reset</td><td>GPU reset</td>") == rental.gpus_per_node, "each GPU with its result"
    rental.refresh_from_db()
    assert rental.status == "ready"
