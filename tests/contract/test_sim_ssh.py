"""The simulator plays the pods over SSH (switch `ssh`): a real asyncssh client against it on 127.0.0.1.

Our simulator's behaviour, not upstream fact: upstream pods run a real sshd. See simulator/README.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncssh
import pytest

from .conftest import SSH_KEY, Api

pytestmark = [pytest.mark.sim_only, pytest.mark.rents]

SCRIPT = "lium-fabric-check.py"  # in the home directory on the pod
WRITE = f"cat > {SCRIPT} <<'PY'\nimport torch.distributed as dist\ndist.all_reduce(x)\nPY"


def torchrun(nnodes: int, rank: int, *, limit: int = 30, master: str = "10.42.0.1") -> str:
    return (
        f"timeout {limit} torchrun --nnodes {nnodes} --nproc_per_node 8 --node_rank {rank} "
        f"--master_addr {master} --master_port 29511 {SCRIPT}"
    )


def keypair() -> tuple[asyncssh.SSHKey, str]:
    key = asyncssh.generate_private_key("ssh-ed25519", comment="contract-ssh")
    return key, key.export_public_key().decode().strip()


def ssh_cluster(api: Api, public_key: str, nodes: int = 2) -> list[dict[str, Any]]:
    """Turn SSH on, rent a cluster with the key (and another), and return its running members by rank."""
    api.config(ssh=True)
    r = api.rent(api.order(api.cheapest(nodes), user_public_key=[public_key, SSH_KEY]))
    assert r.status_code == 200, r.text
    api.advance(5)
    members = [pod for pod in api.pods() if pod["id"] in r.json()["pod_ids"]]
    return sorted(members, key=lambda pod: pod["cluster_node_index"])


async def run(pod: dict[str, Any], key: asyncssh.SSHKey, command: str) -> asyncssh.SSHCompletedProcess:
    port = pod["ports_mapping"]["22"]
    async with asyncssh.connect(
        "127.0.0.1", port, username="root", client_keys=[key], known_hosts=None, connect_timeout=10
    ) as conn:
        return await asyncio.wait_for(conn.run(command, check=False), 30)


def authorized_keys(api: Api, pod: dict[str, Any]) -> list[str]:
    return api.sim("GET", f"pods/{pod['id']}/authorized-keys")["authorized_keys"]


def test_each_member_serves_ssh_on_its_mapped_port_with_the_orders_keys(api: Api) -> None:
    key, public = keypair()
    members = ssh_cluster(api, public)
    for pod in members:
        assert pod["ssh_connect_cmd"] == f"ssh root@127.0.0.1 -p {pod['ports_mapping']['22']}"
        assert asyncio.run(run(pod, key, f"rm -f {SCRIPT}")).exit_status == 0
        assert authorized_keys(api, pod) == [public, SSH_KEY]
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    with pytest.raises(asyncssh.PermissionDenied):
        asyncio.run(run(members[0], stranger, f"rm -f {SCRIPT}"))


def test_a_removed_key_is_gone_from_the_list_and_no_longer_lets_in(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[1]
    body = public.split()[1]
    result = asyncio.run(run(pod, key, f"sed -i '\\|{body}|d' ~/.ssh/authorized_keys"))
    assert result.exit_status == 0
    assert authorized_keys(api, pod) == [SSH_KEY]
    with pytest.raises(asyncssh.PermissionDenied):
        asyncio.run(run(pod, key, f"rm -f {SCRIPT}"))


def test_any_other_command_is_refused(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[0]
    for command in ("cat /etc/shadow", f"rm -f {SCRIPT}; curl evil", f"cat > {SCRIPT} <<'PY'\nimport os\nPY"):
        result = asyncio.run(run(pod, key, command))
        assert result.exit_status == 127
        assert "command not allowed in the simulator" in str(result.stderr)


def test_the_all_reduce_reports_the_fabrics_bus_bandwidth_and_a_slow_member_lowers_it(api: Api) -> None:
    key, public = keypair()
    members = ssh_cluster(api, public)

    async def check() -> list[asyncssh.SSHCompletedProcess]:
        await asyncio.gather(*(run(pod, key, WRITE) for pod in members))
        return await asyncio.gather(*(run(pod, key, torchrun(2, rank)) for rank, pod in enumerate(members)))

    first, second = asyncio.run(check())
    assert first.exit_status == second.exit_status == 0
    # H100 fabric, 400 Gb/s per GPU x 8 GPUs x 0.9 = 2880 Gb/s = 360 GB/s; only rank 0 prints.
    assert "bus bandwidth 360.0 GB/s" in str(first.stdout) and second.stdout == ""
    api.config(slow_executors=[members[1]["executor"]["id"]])
    first, _ = asyncio.run(check())
    assert "bus bandwidth 72.0 GB/s" in str(first.stdout)


def test_the_all_reduce_needs_its_script_and_gives_up_when_a_node_never_joins(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[0]
    assert asyncio.run(run(pod, key, torchrun(2, 0))).exit_status == 2, "no script written yet"
    asyncio.run(run(pod, key, WRITE))
    assert asyncio.run(run(pod, key, torchrun(2, 0, limit=1))).exit_status == 124, "timeout ends the wait"


def test_on_a_broken_executor_the_all_reduce_fails_at_once(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[1]
    api.config(broken_executors=[pod["executor"]["id"]])
    asyncio.run(run(pod, key, WRITE))
    result = asyncio.run(run(pod, key, torchrun(2, 1)))
    assert result.exit_status == 1 and "NCCL error" in str(result.stderr)


def test_an_unreachable_executor_refuses_connections_until_it_is_back(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[1]
    api.config(unreachable_executors=[pod["executor"]["id"]])
    with pytest.raises(OSError):
        asyncio.run(run(pod, key, f"rm -f {SCRIPT}"))
    api.config(unreachable_executors=[])
    assert asyncio.run(run(pod, key, f"rm -f {SCRIPT}")).exit_status == 0, "back on the same port"


def test_on_a_stalled_executor_commands_never_answer(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[0]
    api.config(stalled_executors=[pod["executor"]["id"]])

    async def stalled() -> None:
        port = pod["ports_mapping"]["22"]
        async with asyncssh.connect("127.0.0.1", port, username="root", client_keys=[key], known_hosts=None) as conn:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(conn.run(f"rm -f {SCRIPT}"), 1)

    asyncio.run(stalled())


def test_an_executor_that_refuses_keys_lets_nobody_in(api: Api) -> None:
    key, public = keypair()
    pod = ssh_cluster(api, public)[0]
    api.config(refuse_key_executors=[pod["executor"]["id"]])
    with pytest.raises(asyncssh.PermissionDenied):
        asyncio.run(run(pod, key, f"rm -f {SCRIPT}"))


def test_the_switches_are_checked(api: Api) -> None:
    r = api.http.post("/_sim/config", json={"slow_executors": "abc"})
    assert r.status_code == 422 and "slow_executors" in r.text
    r = api.http.post("/_sim/config", json={"ssh": "yes"})
    assert r.status_code == 422
    assert api.http.get("/_sim/pods/nope/authorized-keys").status_code == 404
