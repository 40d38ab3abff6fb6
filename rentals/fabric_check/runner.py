"""Running the fabric check over SSH (asyncssh): connect to every member, write the script, run the all-reduce on
all nodes at once, find slow members pairwise when under the floor, then remove the script and the check's key.

Every step has a bounded time, and every connection and command is audited (`FabricCheckResult.audit`). Pods'
host keys are not published by Lium, so none is checked: the session carries no secret (the key is the check's
own, made for this check and removed at the end), and a wrong host could at worst fake a figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncssh

from rentals.fabric_check import commands
from rentals.fabric_check.pairwise import slow_members_find
from rentals.fabric_check.parse import NoFigure, bus_bandwidth_parse, floor_gbps

REFUSED_PAUSE = 1.0  # seconds between connection attempts to a member that refused


@dataclass(frozen=True)
class Member:
    """One cluster member as the check reaches it: its rank, overlay IP and SSH address."""

    rank: int
    overlay_ip: str
    host: str
    port: int
    user: str = "root"


@dataclass(frozen=True)
class Limits:
    """Bounded time per step, in seconds."""

    connect: float = 20
    command: float = 30
    allreduce: int = 300  # the remote `timeout`; the local wait allows a little more


@dataclass(frozen=True)
class AuditEntry:
    """One connection or command on one member, and how it ended."""

    rank: int
    action: str  # connect | run
    detail: str  # user@host:port, or the exact command
    outcome: str  # ok, exit N, refused, timed out, ...


@dataclass
class FabricCheckResult:
    """What the check found; bandwidths in Gb/s (gigabits per second)."""

    status: str  # passed | failed | error
    floor_gbps: float
    bus_bandwidth_gbps: float | None = None
    pairs: dict[tuple[int, int], float] = field(default_factory=dict)  # (rank, rank) -> bus bandwidth
    slow_members: list[int] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    key_removed: dict[int, bool] = field(default_factory=dict)
    error: str = ""

    def as_record(self) -> dict[str, object]:
        """Return the result as JSON-ready data for the rental's timeline (pairs as a list, ranks as keys)."""
        return {
            "status": self.status,
            "floor_gbps": self.floor_gbps,
            "bus_bandwidth_gbps": self.bus_bandwidth_gbps,
            "pairs": [{"ranks": list(ranks), "bus_bandwidth_gbps": gbps} for ranks, gbps in sorted(self.pairs.items())],
            "slow_members": list(self.slow_members),
            "audit": [dataclasses.asdict(entry) for entry in self.audit],
            "key_removed": {str(rank): removed for rank, removed in sorted(self.key_removed.items())},
            "error": self.error,
        }


class CheckError(Exception):
    """The check could not measure; the message names the member(s)."""


class _Session:
    """The open SSH connections of one check and its audit."""

    def __init__(self, members: Sequence[Member], key: asyncssh.SSHKey, limits: Limits) -> None:
        self.members = {member.rank: member for member in members}
        self.key = key
        self.limits = limits
        self.audit: list[AuditEntry] = []
        self.connections: dict[int, asyncssh.SSHClientConnection] = {}
        self.stop_reason = "the check was cancelled"

    async def connect_all(self) -> None:
        """Connect to every member at once; raise CheckError naming each member that could not be reached."""
        problems = await asyncio.gather(*(self._connect(member) for member in self.members.values()))
        failed = [problem for problem in problems if problem]
        if failed:
            raise CheckError("; ".join(failed))

    async def _connect(self, member: Member) -> str:
        target = f"{member.user}@{member.host}:{member.port}"
        # A pod listed RUNNING may not accept SSH yet: a refused connection is tried again within the connect limit.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.connect
        while True:
            outcome = await self._connect_once(member)
            if not outcome.startswith("unreachable") or loop.time() + REFUSED_PAUSE >= deadline:
                break
            await asyncio.sleep(REFUSED_PAUSE)
        self.audit.append(AuditEntry(member.rank, "connect", target, outcome))
        return "" if outcome == "ok" else f"member rank {member.rank} ({target}): {outcome}"

    async def _connect_once(self, member: Member) -> str:
        try:
            self.connections[member.rank] = await asyncio.wait_for(
                asyncssh.connect(
                    member.host,
                    member.port,
                    username=member.user,
                    client_keys=[self.key],
                    known_hosts=None,
                    agent_path=None,
                    config=None,
                    preferred_auth="publickey",
                    connect_timeout=self.limits.connect,
                ),
                self.limits.connect + 5,
            )
            outcome = "ok"
        except asyncssh.PermissionDenied:
            outcome = "key refused"
        except (TimeoutError, asyncssh.ConnectionLost):
            outcome = f"no answer within {self.limits.connect:g} s"
        except (OSError, asyncssh.Error) as exc:
            outcome = f"unreachable ({exc.strerror if isinstance(exc, OSError) and exc.strerror else exc})"
        return outcome

    async def run(self, rank: int, command: str, seconds: float) -> tuple[int | None, str, str]:
        """Run one command; return (exit status or None, stdout, what happened), audited."""
        try:
            done = await asyncio.wait_for(self.connections[rank].run(command, check=False), seconds)
            status, out = done.exit_status, str(done.stdout or "")
            outcome = f"exit {status}" + (f": {str(done.stderr).strip()[:200]}" if status else "")
        except TimeoutError:
            status, out, outcome = None, "", f"timed out after {seconds:g} s"
        except (OSError, asyncssh.Error) as exc:
            status, out, outcome = None, "", f"failed ({exc})"
        except asyncio.CancelledError:
            self.audit.append(AuditEntry(rank, "run", command, f"stopped: {self.stop_reason}"))
            raise
        self.audit.append(AuditEntry(rank, "run", command, outcome))
        return status, out, outcome

    async def everywhere(self, command: str) -> None:
        """Run a command on every member at once; raise CheckError naming the members where it failed."""
        ranks = sorted(self.connections)
        results = await asyncio.gather(*(self.run(rank, command, self.limits.command) for rank in ranks))
        failed = [f"member rank {rank}: {r[2]}" for rank, r in zip(ranks, results, strict=True) if r[0] != 0]
        if failed:
            raise CheckError("; ".join(failed))

    async def allreduce(self, ranks: Sequence[int], gpus_per_node: int) -> float:
        """Run the all-reduce across `ranks` (the lowest is the master); return rank 0's bus bandwidth."""
        ranks = sorted(ranks)
        master = self.members[ranks[0]].overlay_ip
        runs = [
            commands.allreduce_run(
                nnodes=len(ranks),
                gpus_per_node=gpus_per_node,
                node_rank=index,
                master_addr=master,
                seconds=self.limits.allreduce,
            )
            for index in range(len(ranks))
        ]
        results = await self._together(dict(zip(ranks, runs, strict=True)), self.limits.allreduce + 10)
        failed = [f"member rank {rank}: {r[2]}" for rank, r in sorted(results.items()) if r[0] != 0]
        if failed:
            raise CheckError(f"the all-reduce over ranks {ranks} failed: " + "; ".join(failed))
        try:
            return bus_bandwidth_parse(results[ranks[0]][1])
        except NoFigure as exc:
            raise CheckError(f"member rank {ranks[0]} printed no figure: {exc}") from exc

    async def _together(self, runs: dict[int, str], seconds: float) -> dict[int, tuple[int | None, str, str]]:
        """Run one command per member at once; once one fails, stop the others (they would wait for it in vain)."""
        tasks = {asyncio.create_task(self.run(rank, command, seconds)): rank for rank, command in runs.items()}
        results: dict[int, tuple[int | None, str, str]] = {}
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            results.update((tasks[task], task.result()) for task in done)
            failed = sorted(tasks[task] for task in done if task.result()[0] != 0)
            if failed and pending:
                self.stop_reason = f"member rank {failed[0]} failed"
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
        return results

    async def clean_up(self, public_line: str) -> dict[int, bool]:
        """Remove the script and the check's key on every member reached; True where the key is gone."""
        removed = {rank: False for rank in self.members}

        async def one(rank: int) -> None:
            await self.run(rank, commands.script_remove(), self.limits.command)
            status, _, _ = await self.run(rank, commands.key_remove(public_line), self.limits.command)
            removed[rank] = status == 0

        await asyncio.gather(*(one(rank) for rank in sorted(self.connections)))
        return removed

    async def close(self) -> None:
        """Close every connection and wait (bounded) until each is shut."""
        for connection in self.connections.values():
            connection.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(c.wait_closed() for c in self.connections.values())), 5)


def _members_check(members: Sequence[Member]) -> None:
    if len(members) < 2 or len({member.rank for member in members}) != len(members):
        raise ValueError("a fabric check needs at least two members with distinct ranks")
    for member in members:
        ipaddress.IPv4Address(member.overlay_ip)  # ValueError for anything else


async def fabric_check_run(
    members: Sequence[Member],
    *,
    private_key_pem: str,
    public_key_line: str,
    link_rate_gbps: float,
    gpus_per_node: int,
    floor_fraction: float | None = None,
    limits: Limits | None = None,
) -> FabricCheckResult:
    """Check the fabric of `members`; never raises for what happens on the nodes (status `error` says it)."""
    _members_check(members)
    commands.key_remove(public_key_line)  # refuses a malformed line before anything runs
    result = FabricCheckResult(status="error", floor_gbps=floor_gbps(link_rate_gbps, gpus_per_node, floor_fraction))
    session = _Session(members, asyncssh.import_private_key(private_key_pem), limits or Limits())
    try:
        await session.connect_all()
        await session.everywhere(commands.script_write())
        result.bus_bandwidth_gbps = await session.allreduce(sorted(session.members), gpus_per_node)
        result.status = "passed"
        if result.bus_bandwidth_gbps < result.floor_gbps:

            async def measure(a: int, b: int) -> float:
                return await session.allreduce([a, b], gpus_per_node)

            result.pairs, result.slow_members = await slow_members_find(
                measure, sorted(session.members), result.floor_gbps
            )
            result.status = "failed"
    except CheckError as exc:
        result.status, result.error = "error", str(exc)
    finally:
        result.key_removed = await session.clean_up(public_key_line)
        await session.close()
        result.audit = session.audit
    return result


def fabric_check_run_sync(members: Sequence[Member], **kwargs: Any) -> FabricCheckResult:
    """Run the check from synchronous code (a Celery task); the same keyword arguments as fabric_check_run."""
    return asyncio.run(fabric_check_run(members, **kwargs))
