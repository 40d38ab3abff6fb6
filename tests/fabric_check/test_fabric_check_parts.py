"""The fabric check's pieces without SSH: reading figures strictly, building commands safely, the key pair and
the pairwise search's rule."""

from __future__ import annotations

import asyncio

import asyncssh
import pytest

from rentals.fabric_check import commands
from rentals.fabric_check.keys import check_key_generate
from rentals.fabric_check.pairwise import slow_members_find
from rentals.fabric_check.parse import NoFigure, bus_bandwidth_parse, floor_gbps, link_rate_parse

LINE = "all_reduce 256 MiB over 16 GPUs: 1.4 ms, bus bandwidth 360.0 GB/s"


def test_the_bus_bandwidth_is_read_from_the_one_result_line_in_gigabits() -> None:
    assert bus_bandwidth_parse(f"NCCL INFO warming up\n{LINE}\n") == pytest.approx(2880)


@pytest.mark.parametrize(
    "output",
    [
        "",
        "Traceback (most recent call last):\n  RuntimeError: NCCL error",
        f"{LINE}\n{LINE}",
        "all_reduce 256 MiB over 16 GPUs: 1.4 ms, bus bandwidth fast GB/s",
        "all_reduce 256 MiB over 16 GPUs: 1.4 ms, bus bandwidth 360.0 GB/s; rm -rf /",
        "all_reduce 256 MiB over 16 GPUs: 1.4 ms, bus bandwidth 0.0 GB/s",
    ],
)
def test_anything_but_one_well_formed_line_is_no_figure(output: str) -> None:
    with pytest.raises(NoFigure):
        bus_bandwidth_parse(output)


@pytest.mark.parametrize(
    ("text", "gbits"),
    [("400 Gb/sec (4X NDR)", 400), ("200 Gb/sec (4X HDR)", 200), ("100 Gb/s", 100), (None, None), ("", None)],
)
def test_the_link_rate_is_read_from_the_offer_text(text: str | None, gbits: float | None) -> None:
    assert link_rate_parse(text) == gbits


def test_the_floor_defaults_to_the_setting(settings) -> None:  # type: ignore[no-untyped-def]
    settings.FABRIC_CHECK_FLOOR_FRACTION = 0.5
    assert floor_gbps(200, 8) == 800 and floor_gbps(200, 8, 0.7) == pytest.approx(1120)


def test_the_check_key_is_a_fresh_ed25519_pair_named_for_the_dashboard() -> None:
    key, other = check_key_generate(), check_key_generate()
    assert key.public_line.startswith("ssh-ed25519 ") and key.public_line.endswith(" lium-dashboard-check")
    assert key.public_line != other.public_line
    assert (
        asyncssh.import_private_key(key.private_pem).export_public_key().decode().split()[1]
        == (key.public_line.split()[1])
    )
    assert key.private_pem not in repr(key)


def test_commands_refuse_values_that_are_not_what_they_claim() -> None:
    with pytest.raises(ValueError):
        commands.allreduce_run(nnodes=2, gpus_per_node=8, node_rank=0, master_addr="10.0.0.1; reboot", seconds=5)
    with pytest.raises(ValueError):
        commands.key_remove("ssh-ed25519 AAAA|d;reboot;#")
    assert commands.key_remove("ssh-ed25519 AAAAC3Nz+/= c") == "sed -i '\\|AAAAC3Nz+/=|d' ~/.ssh/authorized_keys"


def search(slow: set[int], ranks: list[int]) -> tuple[dict[tuple[int, int], float], list[int]]:
    async def measure(a: int, b: int) -> float:
        return 1.0 if slow & {a, b} else 10.0

    return asyncio.run(slow_members_find(measure, ranks, floor=5.0))


def test_pairs_with_rank_0_name_the_slow_members() -> None:
    figures, slow = search({2, 4}, [0, 1, 2, 3, 4])
    assert slow == [2, 4] and set(figures) == {(0, 1), (0, 2), (0, 3), (0, 4)}


def test_a_slow_rank_0_is_found_through_the_next_reference() -> None:
    figures, slow = search({0}, [0, 1, 2, 3])
    assert slow == [0] and (1, 2) in figures


def test_when_no_healthy_pair_is_found_every_member_is_named() -> None:
    assert search({0, 1, 2, 3}, [0, 1, 2, 3])[1] == [0, 1, 2, 3]
    assert search({1}, [0, 1])[1] == [0, 1]
