"""The fabric check's runner against the simulator's pods over SSH (real asyncssh on both sides, 127.0.0.1).

The simulator's model (simulator/README.md): a healthy H100 node gives 400 Gb/s x 8 GPUs x 0.9 = 2880 Gb/s of bus
bandwidth, a slow one a fifth of that (576); the floor is 0.7 x 400 x 8 = 2240 Gb/s.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from rentals.fabric_check.keys import check_key_generate
from rentals.fabric_check.runner import FabricCheckResult, Limits, Member, fabric_check_run_sync
from rentals.upstream.parse import ssh_parts
from tests.conftest import SIM_KEY, Simulator

CUSTOMER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMo32AY0vFK7g5FBIBcyPdxaxSEM5rEc0kEzMVveA9b+ customer@laptop"
HEADERS = {"X-API-Key": SIM_KEY}
LIMITS = Limits(connect=5, command=10, allreduce=20)


def cluster(simulator: Simulator, public_line: str, nodes: int) -> list[dict[str, Any]]:
    """Rent `nodes` H100 nodes with the customer's key and the check's, SSH on; return the members by rank."""
    http = simulator.http
    http.post("/_sim/config", json={"ssh": True}).raise_for_status()
    offer = simulator.offers()[0]
    executors = [node["id"] for node in offer["nodes"] if node["available_gpu_count"] == node["gpu_count"]][:nodes]
    order = {"pod_name": "fabric", "executor_uuids": executors, "user_public_key": [CUSTOMER_KEY, public_line]}
    r = http.post("/api/executors/cluster/rent", json=order, headers=HEADERS)
    assert r.status_code == 200, r.text
    http.post("/_sim/clock", json={"advance_seconds": 5}).raise_for_status()
    pods = [pod for pod in http.get("/api/pods", headers=HEADERS).json() if pod["id"] in r.json()["pod_ids"]]
    return sorted(pods, key=lambda pod: pod["cluster_node_index"])


def members_of(pods: list[dict[str, Any]]) -> list[Member]:
    members = []
    for pod in pods:
        parts = ssh_parts(pod["ssh_connect_cmd"])
        assert parts is not None
        user, host, port = parts
        members.append(Member(pod["cluster_node_index"], pod["cluster_overlay_ip"], host, port, user))
    return members


def check(
    simulator: Simulator, nodes: int, limits: Limits = LIMITS, **switches: Any
) -> tuple[FabricCheckResult, list[dict[str, Any]]]:
    """Run the check on a fresh cluster after applying `switches` (by rank: slow=[2], unreachable=[1], ...)."""
    key = check_key_generate()
    pods = cluster(simulator, key.public_line, nodes)
    config = {f"{name}_executors": [pods[rank]["executor"]["id"] for rank in ranks] for name, ranks in switches.items()}
    simulator.http.post("/_sim/config", json=config).raise_for_status()
    result = fabric_check_run_sync(
        members_of(pods),
        private_key_pem=key.private_pem,
        public_key_line=key.public_line,
        link_rate_gbps=400,
        gpus_per_node=8,
        limits=limits,
    )
    return result, pods


def keys_on(simulator: Simulator, pod: dict[str, Any]) -> list[str]:
    return simulator.http.get(f"/_sim/pods/{pod['id']}/authorized-keys").json()["authorized_keys"]


@pytest.mark.parametrize("nodes", [2, 4])
def test_a_healthy_cluster_passes_and_the_check_key_is_removed(simulator: Simulator, nodes: int) -> None:
    result, pods = check(simulator, nodes)
    assert result.status == "passed", result.error
    assert result.bus_bandwidth_gbps == pytest.approx(2880) and result.floor_gbps == pytest.approx(2240)
    assert result.slow_members == [] and result.pairs == {}
    assert result.key_removed == dict.fromkeys(range(nodes), True)
    for pod in pods:
        assert keys_on(simulator, pod) == [CUSTOMER_KEY], "only the check's key is gone"


def test_only_the_checks_own_commands_run_and_each_is_audited(simulator: Simulator) -> None:
    result, _ = check(simulator, 2)
    for rank in (0, 1):
        actions = [(entry.action, entry.outcome) for entry in result.audit if entry.rank == rank]
        assert actions == [("connect", "ok")] + [("run", "exit 0")] * 4
        ran = [entry.detail for entry in result.audit if entry.rank == rank and entry.action == "run"]
        assert ran[0].startswith("cat > .lium-dashboard-fabric-check.py <<'PY'\n")
        assert ran[1] == (
            f"timeout 20 torchrun --nnodes 2 --nproc_per_node 8 --node_rank {rank} --master_addr 10.42.0.1 "
            "--master_port 29511 .lium-dashboard-fabric-check.py"
        )
        assert ran[2] == "rm -f .lium-dashboard-fabric-check.py"
        assert ran[3].startswith("sed -i '\\|") and ran[3].endswith("|d' ~/.ssh/authorized_keys")


def test_a_slow_member_fails_the_check_and_is_named(simulator: Simulator) -> None:
    result, pods = check(simulator, 4, slow=[2])
    assert result.status == "failed" and result.error == ""
    assert result.bus_bandwidth_gbps == pytest.approx(576)
    assert result.slow_members == [2]
    assert result.pairs == {(0, 1): pytest.approx(2880), (0, 2): pytest.approx(576), (0, 3): pytest.approx(2880)}
    assert all(result.key_removed.values())
    assert all(keys_on(simulator, pod) == [CUSTOMER_KEY] for pod in pods)
    record = json.loads(json.dumps(result.as_record()))  # what the timeline will store
    assert record["slow_members"] == [2] and record["pairs"][1] == {"ranks": [0, 2], "bus_bandwidth_gbps": 576.0}
    assert record["key_removed"] == {"0": True, "1": True, "2": True, "3": True}
    assert len(record["audit"]) == len(result.audit) and "PRIVATE KEY" not in json.dumps(record)


def test_a_slow_rank_0_is_found_by_elimination(simulator: Simulator) -> None:
    result, _ = check(simulator, 3, slow=[0])
    assert result.status == "failed" and result.slow_members == [0]
    assert result.pairs[(1, 2)] == pytest.approx(2880), "ranks 1 and 2 prove each other healthy"


def test_with_two_nodes_a_slow_one_cannot_be_told_apart_so_both_are_named(simulator: Simulator) -> None:
    result, _ = check(simulator, 2, slow=[1])
    assert result.status == "failed" and result.slow_members == [0, 1]


def test_an_unreachable_member_ends_the_check_with_an_error_naming_it(simulator: Simulator) -> None:
    result, pods = check(simulator, 3, unreachable=[1])
    assert result.status == "error" and result.bus_bandwidth_gbps is None
    assert result.error.startswith("member rank 1 (root@127.0.0.1:") and "unreachable" in result.error
    assert result.key_removed == {0: True, 1: False, 2: True}, "removed wherever it was reached"
    assert not any("torchrun" in entry.detail for entry in result.audit), "nothing runs without every member"
    assert keys_on(simulator, pods[0]) == [CUSTOMER_KEY]


def test_a_member_whose_ssh_comes_up_a_moment_late_is_tried_again_and_the_check_passes(simulator: Simulator) -> None:
    key = check_key_generate()
    pods = cluster(simulator, key.public_line, 2)
    simulator.http.post("/_sim/config", json={"unreachable_executors": [pods[1]["executor"]["id"]]}).raise_for_status()
    # The listener opens again while the check is still within its connect limit (a pod RUNNING before its sshd).
    timer = threading.Timer(1.5, lambda: simulator.http.post("/_sim/config", json={"unreachable_executors": []}))
    timer.start()
    try:
        result = fabric_check_run_sync(
            members_of(pods),
            private_key_pem=key.private_pem,
            public_key_line=key.public_line,
            link_rate_gbps=400,
            gpus_per_node=8,
            limits=LIMITS,
        )
    finally:
        timer.join()
    assert result.status == "passed", result.error
    assert [entry.outcome for entry in result.audit if entry.action == "connect"] == ["ok", "ok"]
    assert all(result.key_removed.values())


def test_a_hung_member_ends_the_check_in_bounded_time_naming_it(simulator: Simulator) -> None:
    result, _ = check(simulator, 2, Limits(connect=5, command=1, allreduce=20), stalled=[1])
    assert result.status == "error" and result.error == "member rank 1: timed out after 1 s"
    assert result.key_removed == {0: True, 1: False}
    assert not any("torchrun" in entry.detail for entry in result.audit)


def test_when_one_member_fails_the_all_reduce_the_others_are_stopped_not_waited_for(simulator: Simulator) -> None:
    result, _ = check(simulator, 3, broken=[2])
    assert result.status == "error" and result.bus_bandwidth_gbps is None
    assert "member rank 2: exit 1: " in result.error and "NCCL error" in result.error
    runs = {entry.rank: entry.outcome for entry in result.audit if "torchrun" in entry.detail}
    assert runs[0] == runs[1] == "stopped: member rank 2 failed"
    assert all(result.key_removed.values())


def test_a_member_that_refuses_the_key_is_named(simulator: Simulator) -> None:
    result, _ = check(simulator, 2, refuse_key=[0])
    assert result.status == "error" and "member rank 0" in result.error and "key refused" in result.error
    assert result.key_removed == {0: False, 1: True}


def test_the_floor_is_the_configured_share_of_link_rate_times_gpus(simulator: Simulator, settings: Any) -> None:
    settings.FABRIC_CHECK_FLOOR_FRACTION = 0.95  # above what the simulator's healthy nodes reach (0.9)
    result, _ = check(simulator, 2)
    assert result.floor_gbps == pytest.approx(3040) and result.status == "failed"
