"""The preset pages, the fabric page's "Start from a preset", "Save as preset…" and "Rent again", against the
simulator's offers."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from presets.models import Preset
from rentals.models import Rental
from rentals.states import RentalStatus
from tests.conftest import SSH_KEY, Simulator
from tests.customer_presets.conftest import H100, cheapest

pytestmark = pytest.mark.django_db


def _as(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def _rent_form(client: Client, url: str):  # type: ignore[no-untyped-def]
    """Follow a redirect to the rent form; return its response and the form's initial values."""
    page = client.get(url)
    assert page.status_code == 200, page.content[:500]
    form = page.context["form"]
    return page, {name: form[name].value() for name in form.fields}


PRESET_POST = {
    "name": "big h100",
    "gpu_type": "H100",
    "node_count": "2",
    "fabric_type": "infiniband",
    "min_link_rate_gbps": "400",
    "max_price_per_node_hour": "20",
    "pod_name": "train",
    "ssh_public_keys": SSH_KEY,
    "termination_hours": "4",
}


def test_a_preset_is_saved_and_listed_for_the_whole_team(simulator: Simulator, alice, carol, acme) -> None:  # type: ignore[no-untyped-def]
    answer = _as(alice).post("/presets/", {**PRESET_POST, "customer": str(acme.pk)})
    assert answer.status_code == 302
    preset = Preset.objects.get()
    assert (preset.customer, preset.name, preset.node_count, preset.min_link_rate_gbps) == (acme, "big h100", 2, 400)
    page = _as(carol).get("/presets/")
    assert b"big h100" in page.content  # shared within the customer


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("pod_name", "Bad Name", "valid pod name"),
        ("ssh_public_keys", "not a key", "Line 1"),
        ("node_count", "1", "greater than or equal to 2"),
        ("termination_hours", "9999", "less than or equal to 720"),
        ("max_price_per_node_hour", "-1", "greater than or equal to 0.01"),
        ("name", "   ", "required"),
    ],
)
def test_bad_preset_fields_say_what_to_fix(simulator: Simulator, alice, acme, field, value, says) -> None:  # type: ignore[no-untyped-def]
    page = _as(alice).post("/presets/", {**PRESET_POST, "customer": str(acme.pk), field: value})
    assert page.status_code == 200
    assert says in " ".join(page.context["form"].errors[field])
    assert not Preset.objects.exists()


def test_a_second_preset_of_the_same_name_is_refused_by_name(simulator: Simulator, alice, acme, make_preset) -> None:  # type: ignore[no-untyped-def]
    make_preset(name="big h100")
    page = _as(alice).post("/presets/", {**PRESET_POST, "customer": str(acme.pk)})
    assert "already has a preset named 'big h100'" in " ".join(page.context["form"].errors["name"])


def test_save_as_preset_on_the_rent_form_fills_in_the_preset_form(simulator: Simulator, alice, acme) -> None:  # type: ignore[no-untyped-def]
    nodes = cheapest(simulator, count=3)
    posted = {"fabric": H100, "customer": str(acme.pk), "executor_ids": nodes, "pod_name": "job-7"}
    page = _as(alice).post("/presets/from-rent-form/", {**posted, "ssh_public_keys": SSH_KEY, "enable_jupyter": "on"})
    form = page.context["form"]
    assert form["gpu_type"].value() == "NVIDIA H100 80GB HBM3"
    assert (form["node_count"].value(), form["pod_name"].value(), form["enable_jupyter"].value()) == (3, "job-7", True)
    assert form["ssh_public_keys"].value() == SSH_KEY
    assert not Preset.objects.exists()  # saved only once named


def test_using_a_preset_opens_the_rent_form_on_the_cheapest_matching_nodes(
    simulator: Simulator, alice, make_preset
) -> None:  # type: ignore[no-untyped-def]
    preset = make_preset()
    client = _as(alice)
    fabrics = client.get("/fabrics/")
    assert f"/presets/{preset.pk}/use/".encode() in fabrics.content  # the fabric page offers it
    answer = client.get(f"/presets/{preset.pk}/use/")
    assert answer.status_code == 302 and parse_qs(urlsplit(answer["Location"]).query)["fabric"] == [H100]
    page, initial = _rent_form(client, answer["Location"])
    assert sorted(initial["executor_ids"]) == sorted(cheapest(simulator))
    assert (initial["pod_name"], initial["termination_hours"], initial["enable_jupyter"]) == ("train", 5, True)
    assert initial["ssh_public_keys"] == SSH_KEY
    assert b"From preset" in page.content


def test_a_preset_nothing_fits_goes_back_to_the_fabrics_saying_why(simulator: Simulator, alice, make_preset) -> None:  # type: ignore[no-untyped-def]
    preset = make_preset(max_price_per_node_hour=1)
    page = _as(alice).get(f"/presets/{preset.pk}/use/", follow=True)
    assert page.request["PATH_INFO"] == "/fabrics/"
    assert "No fabric offers 2 nodes of H100" in page.content.decode()


def test_another_customers_preset_is_not_found(simulator: Simulator, bob, make_preset) -> None:  # type: ignore[no-untyped-def]
    preset = make_preset()
    assert _as(bob).get(f"/presets/{preset.pk}/use/").status_code == 404
    assert _as(bob).post(f"/presets/{preset.pk}/delete/").status_code == 404
    assert b"h100x2" not in _as(bob).get("/presets/").content


def _terminated_rental(alice, acme, nodes: list[str]) -> Rental:  # type: ignore[no-untyped-def]
    from rentals.orders.order import RentOrder
    from rentals.services import rental_submit

    order = RentOrder(
        fabric_id=H100,
        executor_ids=nodes,
        pod_name="old-job",
        public_keys=[SSH_KEY, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB lium-dashboard-check"],
        template_id="tpl-x",
        termination_hours=3,
        enable_jupyter=True,
        enable_backups=False,
        gpu_type="NVIDIA H100 80GB HBM3",
        gpus_per_node=8,
    )
    rental = rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    Rental.objects.filter(pk=rental.pk).update(status=RentalStatus.TERMINATED)
    return rental


def test_rent_again_on_a_terminated_rental_uses_its_nodes_when_free(
    simulator: Simulator, alice, acme, enqueued
) -> None:  # type: ignore[no-untyped-def]
    nodes = cheapest(simulator, count=3)[1:]
    rental = _terminated_rental(alice, acme, nodes)
    client = _as(alice)
    assert b"Rent again" in client.get(f"/rentals/{rental.public_id}/").content
    answer = client.get(f"/rentals/{rental.public_id}/again/")
    page, initial = _rent_form(client, answer["Location"])
    assert initial["executor_ids"] == nodes
    assert (initial["pod_name"], initial["termination_hours"], initial["enable_jupyter"]) == ("old-job", 3, True)
    assert initial["ssh_public_keys"] == SSH_KEY  # never the fabric check's own key
    assert (initial["enable_backups"], initial["enable_volume_encryption"]) == (False, True)
    assert b"the same 2 nodes" in page.content


def test_rent_again_picks_the_cheapest_of_its_kind_when_its_nodes_are_taken(
    simulator: Simulator, alice, acme, enqueued
) -> None:  # type: ignore[no-untyped-def]
    taken = cheapest(simulator, count=2)
    rental = _terminated_rental(alice, acme, taken)
    simulator.config(taken_executors=taken)
    client = _as(alice)
    page, initial = _rent_form(client, client.get(f"/rentals/{rental.public_id}/again/")["Location"])
    assert initial["executor_ids"] == cheapest(simulator) and not set(taken) & set(initial["executor_ids"])
    assert b"no longer all free" in page.content


def _ended_after_the_cached_listing(simulator: Simulator, alice, acme) -> tuple[Client, Rental, list[str]]:  # type: ignore[no-untyped-def]
    """A rental on the 2 cheapest nodes, the listing cached while it holds them, then its end (after that listing).

    Return alice's client, the rental and its nodes (still listed as taken until the test frees them)."""
    nodes = cheapest(simulator, count=2)
    rental = _terminated_rental(alice, acme, nodes)
    client = _as(alice)
    simulator.config(taken_executors=nodes)
    assert client.get("/fabrics/").status_code == 200
    Rental.objects.filter(pk=rental.pk).update(status=RentalStatus.TERMINATED, updated_at=timezone.now())
    return client, rental, nodes


def test_rent_again_right_after_its_nodes_were_freed_uses_them_not_the_listing_cached_before(
    simulator: Simulator, alice, acme, enqueued
) -> None:  # type: ignore[no-untyped-def]
    client, rental, nodes = _ended_after_the_cached_listing(simulator, alice, acme)
    simulator.config(taken_executors=[])  # terminated: Lium lists them free again
    page, initial = _rent_form(client, client.get(f"/rentals/{rental.public_id}/again/")["Location"])
    assert initial["executor_ids"] == nodes
    assert b"the same 2 nodes" in page.content


def test_rent_again_when_lium_cannot_list_again_still_opens_on_the_cached_listing(
    simulator: Simulator, alice, acme, enqueued
) -> None:  # type: ignore[no-untyped-def]
    client, rental, nodes = _ended_after_the_cached_listing(simulator, alice, acme)
    simulator.faults([{"fault": "error_before_commit", "route": "offers", "status": 503}])
    page, initial = _rent_form(client, client.get(f"/rentals/{rental.public_id}/again/")["Location"])
    assert initial["executor_ids"] and not set(nodes) & set(initial["executor_ids"])
    assert b"no longer all free" in page.content


def test_rent_again_asks_lium_again_only_for_a_listing_older_than_the_rentals_end(
    simulator: Simulator, alice, acme, enqueued
) -> None:  # type: ignore[no-untyped-def]
    # Someone else rents them at once: they stay taken.
    client, rental, _nodes = _ended_after_the_cached_listing(simulator, alice, acme)
    asked_before = len(simulator.requests("offers"))
    for _ in range(3):
        client.get(f"/rentals/{rental.public_id}/again/")
    # The first click reads the listing anew (older than the end); the listing it caches is newer, so no more.
    assert len(simulator.requests("offers")) == asked_before + 1


def test_support_cannot_rent_again_or_save_presets(
    simulator: Simulator, alice, acme, enqueued, django_user_model
) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import Group

    sam = django_user_model.objects.create_user("sam", "sam@example.com", "pw")
    sam.groups.add(Group.objects.get_or_create(name="support")[0])
    rental = _terminated_rental(alice, acme, cheapest(simulator))
    assert _as(sam).get(f"/rentals/{rental.public_id}/again/").status_code == 403
    assert _as(sam).post("/presets/", {**PRESET_POST, "customer": str(acme.pk)}).status_code == 403
    assert _as(sam).get("/presets/").status_code == 200


def test_staff_read_presets_and_watches_in_the_admin(simulator: Simulator, admin_client, make_preset) -> None:  # type: ignore[no-untyped-def]
    make_preset()
    assert b"h100x2" in admin_client.get("/admin/presets/preset/").content
    assert admin_client.get("/admin/presets/capacitywatch/").status_code == 200
    assert admin_client.get("/admin/presets/preset/add/").status_code == 403
