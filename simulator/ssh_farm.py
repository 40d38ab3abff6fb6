"""The pods over SSH (switch ``ssh``): one asyncssh server per pod on its mapped port on 127.0.0.1.

One asyncio loop runs in a daemon thread, started the first time the switch is turned on. ``SshFarm.sync`` is
called under the state lock after every refresh; it only binds sockets and schedules work on the loop, never
waits for it, because the loop's handlers take the state lock themselves (waiting would deadlock).
Host keys are generated in memory per simulator run. Commands are answered by ``simulator/pod_shell.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import socket
import threading
from typing import Any

import asyncssh

from .pod_shell import Rendezvous, pod_command

log = logging.getLogger("simulator")

SSH_USER = "root"


class PodServer(asyncssh.SSHServer):
    """One pod's sshd: public keys only, the user root, the pod's authorized keys."""

    def __init__(self, farm: SshFarm, pod_id: str) -> None:
        self.farm = farm
        self.pod_id = pod_id

    # asyncssh's defaults: authentication is required, passwords are refused.
    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        body = key.export_public_key("openssh").split()[1].decode()
        return username == SSH_USER and self.farm.key_allowed(self.pod_id, body)


class SshFarm:
    """Hold the loop thread, the host key and one listener per pod."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sim-ssh", daemon=True)
        self.thread.start()
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.listeners: dict[str, concurrent.futures.Future[Any]] = {}  # pod id -> asyncssh.listen's acceptor
        self.files: dict[str, dict[str, str]] = {}  # pod id -> path -> content written over SSH
        self.rendezvous: dict[tuple[Any, ...], Rendezvous] = {}  # used in the loop thread only

    # -- called under the state lock -----------------------------------------------------------
    def sync(self) -> None:
        """Serve every pod whose executor is reachable while the switch is on; close the others."""
        state = self.state
        on = bool(state.config.get("ssh"))
        unreachable = set(state.config.get("unreachable_executors") or [])
        for pod_id, pod in state.pods.items():
            wanted = on and pod["node_id"] not in unreachable
            if wanted and pod_id not in self.listeners:
                self._serve(pod)
            elif not wanted and pod_id in self.listeners:
                self._close(pod_id)
        for pod_id in [p for p in self.listeners if p not in state.pods]:
            self._close(pod_id)
            self.files.pop(pod_id, None)

    def _serve(self, pod: dict[str, Any]) -> None:
        """Bind the pod's port (its old number again after an outage, else a free one) and start serving."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", pod.get("ssh_port") or 0))
        except OSError:
            sock.close()
            log.warning("ssh: port %s of pod %s is taken; retrying on the next refresh", pod.get("ssh_port"), pod["id"])
            return
        sock.listen(100)
        sock.setblocking(False)
        pod["ssh_port"] = pod["port"] = sock.getsockname()[1]
        self.listeners[pod["id"]] = asyncio.run_coroutine_threadsafe(self._listen(sock, pod["id"]), self.loop)

    async def _listen(self, sock: socket.socket, pod_id: str) -> asyncssh.SSHAcceptor:
        return await asyncssh.listen(
            sock=sock,
            server_factory=functools.partial(PodServer, self, pod_id),
            server_host_keys=[self.host_key],
            process_factory=functools.partial(pod_command, self, pod_id),
            login_timeout=30,
        )

    def _close(self, pod_id: str) -> None:
        """Stop listening, so a later connection is refused (sessions already open stay, as asyncssh keeps them)."""
        future = self.listeners.pop(pod_id)

        def close(done: concurrent.futures.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.loop.call_soon_threadsafe(done.result().close)

        future.add_done_callback(close)

    def close_all(self) -> None:
        """Close every listener (on reset)."""
        for pod_id in list(self.listeners):
            self._close(pod_id)
        self.files.clear()

    # -- called from the loop thread -----------------------------------------------------------
    def key_allowed(self, pod_id: str, body: str) -> bool:
        """Tell whether the key's base64 body is authorized on a running pod whose executor accepts keys."""
        with self.state.lock:
            pod = self.state.pods.get(pod_id)
            if pod is None or pod["status"] != "RUNNING":
                return False
            if pod["node_id"] in (self.state.config.get("refuse_key_executors") or []):
                return False
            return any(line.split()[1] == body for line in pod["authorized_keys"])

    def pod_view(self, pod_id: str) -> dict[str, Any] | None:
        """Return what a command needs to know about a pod (cluster, overlay IP, rate), or None once gone."""
        with self.state.lock:
            pod = self.state.pods.get(pod_id)
            if pod is None:
                return None
            fabric = next(f for f in self.state.fabrics if f["fabric_id"] == pod["fabric_id"])
            config = self.state.config
            return {
                "cluster_id": pod["cluster_id"],
                "overlay_ip": pod["cluster_overlay_ip"],
                "gpu_count": pod["gpu_count"],
                "link_rate": fabric["link_rate"],
                "slow": pod["node_id"] in (config.get("slow_executors") or []),
                "stalled": pod["node_id"] in (config.get("stalled_executors") or []),
                "broken": pod["node_id"] in (config.get("broken_executors") or []),
            }

    def remove_key(self, pod_id: str, body: str) -> None:
        """Drop every authorized key line whose base64 body is ``body``."""
        with self.state.lock:
            pod = self.state.pods.get(pod_id)
            if pod is not None:
                pod["authorized_keys"] = [k for k in pod["authorized_keys"] if k.split()[1] != body]
