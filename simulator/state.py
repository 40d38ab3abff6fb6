"""In-memory world of the simulator: accounts, keys, offers, pods, idempotency, ledger.

Every mutation happens under ``State.lock``; pod lifecycles are advanced lazily from the
simulated clock whenever something reads them, so no background thread is needed.
"""

from __future__ import annotations

import collections
import copy
import math
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from . import billing, event_log
from .clock import Clock, iso
from .errors import ApiError
from .faults import FaultEngine
from .seed import PHASES, build_accounts, build_fabrics, build_templates, make_node
from .ssh_farm import SshFarm

CREATION_FAILED_TTL = 180.0  # upstream: a failed create is listed for about 3 minutes
ACTIVITY_LIMIT = 20_000  # rows of each account's event log (`GET /users/me/events`)
REQUEST_LOG_LIMIT = 10_000  # recent calls of every route; rent calls are also kept in full


@dataclass
class Options:
    """Start-up settings; ``reset`` rebuilds the world from these."""

    mode: str = "dev"
    seed: int = 1
    fabrics: int = 4
    nodes_per_fabric: int | None = None
    replenish: bool = False
    start_seconds: float = 8.0
    delete_seconds: float = 1.0
    pods_rate_limit_per_min: int = 60
    faults: Any = None
    features: list[str] = field(default_factory=lambda: ["rent_idempotency", "rent_by_spec"])


class State:
    """Hold the whole simulated upstream behind one re-entrant lock."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.lock = threading.RLock()
        self.clock = Clock()
        self.faults = FaultEngine()
        self.stopping = threading.Event()  # set on shutdown so trickling answers end at once
        self.ssh_farm: SshFarm | None = None  # started the first time the ssh switch is on; kept across resets
        self.reset()

    # -- lifecycle of the world -------------------------------------------------------------
    def reset(self) -> None:
        """Restore the seed state, clear faults, ledger, request log and clock offset."""
        opts = self.options
        with self.lock:
            self.clock.reset()
            self.faults.configure(opts.faults)
            self.config: dict[str, Any] = {
                "start_seconds": opts.start_seconds,
                "delete_seconds": opts.delete_seconds,
                "pods_rate_limit_per_min": opts.pods_rate_limit_per_min,
                "cancel_inflight_creates": True,
                "replenish": opts.replenish,
                "features": list(opts.features),
                "idempotency_ttl_seconds": 24 * 3600,
                "honour_idempotency_key": True,
                "multinode_clusters_enabled": True,  # Lium's cluster switch (`GET /v1/shared-config`)
                "events_for_api_keys": True,  # False: `GET /users/me/events` answers 401 to API keys
                # The pods over SSH (simulator/ssh_farm.py) and the executors that misbehave there.
                "ssh": False,
                "slow_executors": [],
                "unreachable_executors": [],
                "refuse_key_executors": [],
                "stalled_executors": [],
                "broken_executors": [],
                "taken_executors": [],  # held by someone else: not offered, not rentable (POST /_sim/config)
            }
            self.accounts, creds = build_accounts()
            self.creds_by_secret = {c["secret"]: c for c in creds}
            self.keys_by_id = {c["id"]: c for c in creds if c["id"]}
            self.templates = build_templates()
            self.fabrics = build_fabrics(opts.seed, opts.fabrics, opts.nodes_per_fabric)
            self.nodes: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
            for fab in self.fabrics:
                for node in fab["nodes"]:
                    self.nodes[node["id"]] = (fab, node)
            self.rented: dict[str, str] = {}  # node id -> pod id
            self.pods: dict[str, dict[str, Any]] = {}
            self.events: dict[str, list[dict[str, Any]]] = {}
            self.event_owner: dict[str, tuple[str, str | None]] = {}
            # account -> its event log, the newest ACTIVITY_LIMIT rows (long chaos and bench runs stay bounded)
            self.activity: dict[str, collections.deque[dict[str, Any]]] = collections.defaultdict(
                lambda: collections.deque(maxlen=ACTIVITY_LIMIT)
            )
            self.ssh_keys: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
            self.idempotency: dict[tuple[str, str], dict[str, Any]] = {}
            self.ledger: list[dict[str, Any]] = []
            # What each pod was charged per UTC day (simulator/billing.py), kept after the pod is removed.
            self.billing_ledger: dict[str, dict[str, Any]] = {}
            self.statement_skews: dict[str, float] = {}  # day -> USD added per pod on the statement (/_sim/billing)
            self.requests: list[dict[str, Any]] = []
            self.request_log: collections.deque[dict[str, Any]] = collections.deque(maxlen=REQUEST_LOG_LIMIT)
            self.pod_hits: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
            # Executors marked slow (POST /_sim/slow-executors): id -> extra start seconds and warning message.
            self.slow_executors: dict[str, dict[str, Any]] = {}
            self.next_port = 40000
            self.machine_requests: list[dict[str, Any]] = []  # POST /machine-requests, per account
            if self.ssh_farm is not None:
                self.ssh_farm.close_all()

    # -- credentials ------------------------------------------------------------------------
    def authenticate(self, headers: Any) -> dict[str, Any]:
        """Return the credential behind X-API-Key or a Bearer token, else raise 401."""
        secret = headers.get("X-API-Key")
        if not secret:
            auth = headers.get("Authorization", "")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                secret = token.strip()
        if not secret:
            raise ApiError(
                401,
                "not_authenticated",
                "Missing credentials",
                hint="Send X-API-Key: <key> or Authorization: Bearer <token>.",
            )
        cred = self.creds_by_secret.get(secret.strip())
        if cred is None:
            raise ApiError(
                401,
                "invalid_api_key",
                "Invalid API key or token",
                hint="Check the key; the simulator's demo keys are listed in simulator/README.md.",
            )
        return cred

    @staticmethod
    def require_scope(cred: dict[str, Any], scope: str) -> None:
        """Refuse with 403 api_key_scope when an API key lacks ``scope``."""
        if scope not in cred["scopes"]:
            raise ApiError(
                403,
                "api_key_scope",
                f"API key '{cred['name']}' does not have the '{scope}' scope",
                hint=f"Use a key with the '{scope}' scope.",
            )

    def check_budget(self, cred: dict[str, Any]) -> None:
        """Refuse with 402 API_KEY_BUDGET_EXCEEDED when the key's lifetime budget is spent."""
        budget = cred.get("max_budget_usd")
        if budget is None:
            return
        spent = cred.get("spent_total_usd", 0.0)
        if spent >= budget:
            data = {"window": "max", "budget_usd": budget, "spent_usd": spent, "api_key_id": cred["id"]}
            msg = f"API key '{cred['name']}' has reached its max budget of ${budget:.2f}"
            raise ApiError(
                402,
                "API_KEY_BUDGET_EXCEEDED",
                msg,
                data=data,
                detail={"message": msg, **data},
                hint="Raise the key's budget or use another key.",
            )

    # -- offers -----------------------------------------------------------------------------
    def offers(self) -> list[dict[str, Any]]:
        """Return the fabric offers with only the nodes that are free right now."""
        with self.lock:
            self.refresh()
            out = []
            for fab in self.fabrics:
                taken = set(self.config["taken_executors"])
                free = [copy.deepcopy(n) for n in fab["nodes"] if n["id"] not in self.rented and n["id"] not in taken]
                out.append(
                    {
                        "fabric_id": fab["fabric_id"],
                        "fabric_type": fab["fabric_type"],
                        "link_rate": fab["link_rate"],
                        "fabric_measured": fab["fabric_measured"],
                        "node_count": len(fab["nodes"]) + fab["reserved"],
                        "nodes": free,
                    }
                )
            return out

    def replenish(self, fab: dict[str, Any]) -> None:
        """Add one fresh free node to a fabric (chaos runs keep pools full)."""
        index = fab["next_node"]
        fab["next_node"] += 1
        node = make_node(fab["kind"], fab["index"], index, self.options.seed)
        fab["nodes"].append(node)
        self.nodes[node["id"]] = (fab, node)

    # -- pods -------------------------------------------------------------------------------
    def add_event(
        self,
        pod: dict[str, Any],
        event_type: str,
        message: str,
        at: float,
        actor: dict[str, Any] | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Record one pod event (kept after the row is gone, with its owner for access checks) and its row in the
        account's event log; `actor` None is the platform."""
        self.event_owner[pod["id"]] = (pod["account_id"], pod["api_key_id"])
        self.events.setdefault(pod["id"], []).append(
            {
                "id": str(uuid.uuid4()),
                "pod_id": pod["id"],
                "event_type": event_type,
                "message": message,
                "created_at": iso(at),
            }
        )
        event_log.record(self, pod, event_type, message, at, actor, detail)

    def deletion_start(self, pod: dict[str, Any], now: float, actor: dict[str, Any] | None) -> None:
        """Turn the pod DELETING for ``delete_seconds`` on behalf of ``actor`` (None: the platform)."""
        pod.update(status="DELETING", updated_at=now, deleting_until=now + self.config["delete_seconds"])
        pod["deleted_by"] = actor
        self.add_event(pod, "deleting", "Pod deletion started", now, actor=actor)

    def remove_pod(self, pod: dict[str, Any]) -> None:
        """Drop a pod row and free its node."""
        self.pods.pop(pod["id"], None)
        if self.rented.get(pod["node_id"]) == pod["id"]:
            del self.rented[pod["node_id"]]

    def refresh(self) -> None:
        """Advance every pod's lifecycle to the simulated now."""
        now = self.clock.now()
        billing.accrue(self, now)  # charge running pods up to now, before any of them changes state
        for pod in list(self.pods.values()):
            sched = pod["removal_scheduled_at"]
            if sched is not None and now >= sched and pod["status"] not in ("DELETING",):
                pod["status"] = "DELETING"
                pod["deleting_until"] = sched + self.config["delete_seconds"]
                pod["updated_at"] = sched
                why = {"reason": "scheduled_removal"}
                self.add_event(pod, "removal", "Scheduled removal started", sched, detail=why)
            if pod["status"] == "PENDING" and now >= pod["ready_at"]:
                pod["updated_at"] = pod["ready_at"]
                if pod["will_fail"]:
                    pod["status"] = "CREATION_FAILED"
                    self.add_event(pod, "creation_failed", pod["will_fail"], pod["ready_at"])
                else:
                    pod["status"] = "RUNNING"
                    self.add_event(pod, "running", "Pod is running", pod["ready_at"])
            if pod["status"] == "REBOOT_PENDING" and now >= pod["reboot_until"]:  # a reboot (routes_repair.py) ends
                pod["updated_at"] = pod["reboot_until"]
                if pod.get("reboot_fails"):
                    pod["status"] = "REBOOT_FAILED"
                    self.add_event(pod, "reboot_failed", pod["reboot_fails"], pod["reboot_until"])
                else:
                    pod["status"] = "RUNNING"
                    self.add_event(pod, "running", "Pod is running after reboot", pod["reboot_until"])
            if pod["status"] == "DELETING" and now >= pod["deleting_until"]:
                # Who asked for the removal; a scheduled one or a cut-off is the platform's.
                self.add_event(pod, "removed", "Pod removed", pod["deleting_until"], actor=pod.get("deleted_by"))
                self.remove_pod(pod)
            elif pod["status"] == "CREATION_FAILED" and now >= pod["ready_at"] + CREATION_FAILED_TTL:
                self.remove_pod(pod)
        if self.config["ssh"] and self.ssh_farm is None:
            self.ssh_farm = SshFarm(self)
        if self.ssh_farm is not None:
            self.ssh_farm.sync()

    @staticmethod
    def sees(cred: dict[str, Any], account_id: str, api_key_id: str | None) -> bool:
        """Tell whether ``cred`` sees what a key of an account made: its account's, or only its own ("own")."""
        return account_id == cred["account_id"] and (cred["visibility"] != "own" or api_key_id == cred["id"])

    def visible_pods(self, cred: dict[str, Any], api_key_id: str | None = None) -> list[dict[str, Any]]:
        """Return the caller's pods (key visibility applies), oldest first; only one key's with ``api_key_id``."""
        return [
            pod
            for pod in self.pods.values()
            if self.sees(cred, pod["account_id"], pod["api_key_id"])
            and (not api_key_id or pod["api_key_id"] == api_key_id)
        ]

    def render_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Shape an internal pod as a GET /pods row."""
        now = self.clock.now()
        status = pod["status"]
        pending = status == "PENDING"
        executor = copy.deepcopy(pod["executor"])
        executor["price_per_gpu"] = None  # upstream does not fill it in the pods payload
        eta = phase = basis = None
        if pending:
            span = max(pod["ready_at"] - pod["created_at"], 1e-9)
            frac = min(max((now - pod["created_at"]) / span, 0.0), 0.999)
            phase = PHASES[int(frac * len(PHASES))]
            eta = max(0, math.ceil(pod["ready_at"] - now))
            basis = pod["eta_basis"]
        running = status == "RUNNING"
        # SSH answers on 127.0.0.1 while the ssh switch serves the pods, else on the executor.
        ssh_host = "127.0.0.1" if self.config["ssh"] else executor["executor_ip_address"]
        return {
            "id": pod["id"],
            "pod_name": pod["pod_name"],
            "status": status,
            "ssh_connect_cmd": f"ssh root@{ssh_host} -p {pod['port']}" if running else None,
            "ports_mapping": self.ports_mapping(pod),
            "created_at": iso(pod["created_at"]),
            "updated_at": iso(pod["updated_at"]),
            "executor": executor,
            "price": pod["price"],
            "gpu_count": pod["gpu_count"],
            "template": pod["template"],
            "local_volume_path": None,
            "removal_scheduled_at": iso(pod["removal_scheduled_at"]),
            "jupyter_installation_status": ("INSTALLED" if running else "PENDING") if pod.get("jupyter_port") else None,
            "jupyter_url": self.jupyter_url(pod, executor) if running else None,
            "enable_volume_encryption": pod["enable_volume_encryption"],
            "volume_encryption_status": ("ENCRYPTED" if running else "PENDING")
            if pod["enable_volume_encryption"]
            else None,
            "workspace_id": None,
            "cluster_id": pod["cluster_id"],
            "cluster_node_index": pod["cluster_node_index"],
            "cluster_overlay_ip": pod["cluster_overlay_ip"],
            "estimated_ready_seconds": eta,
            "eta_basis": basis,
            "phase": phase,
            "api_key_id": pod["api_key_id"],
            "api_key_name": pod["api_key_name"],
            "customer_ref": pod["customer_ref"],
        }

    @staticmethod
    def ports_mapping(pod: dict[str, Any]) -> dict[str, int]:
        """Return the pod's container-to-host ports: SSH, and Jupyter's 8888 when the order asked for it."""
        ports = {"22": pod["port"]}
        if pod.get("jupyter_port"):
            ports["8888"] = pod["jupyter_port"]
        return ports

    @staticmethod
    def jupyter_url(pod: dict[str, Any], executor: dict[str, Any]) -> str | None:
        """Return the running pod's Jupyter URL (on its executor's address), or None without Jupyter."""
        if not pod.get("jupyter_port"):
            return None
        return f"http://{executor['executor_ip_address']}:{pod['jupyter_port']}/lab?token={pod['jupyter_token']}"

    def new_port(self) -> int:
        """Hand out the next host port for a pod's SSH mapping."""
        self.next_port += 1
        return self.next_port

    def pod_for(self, cred: dict[str, Any], pod_id: str) -> dict[str, Any]:
        """Return a pod the caller may see, else 404."""
        pod = self.pods.get(pod_id)
        if pod is None or not self.sees(cred, pod["account_id"], pod["api_key_id"]):
            raise ApiError(404, "pod_not_found", f"Pod {pod_id} not found")
        return pod

    @staticmethod
    def may_manage(cred: dict[str, Any], pod: dict[str, Any]) -> bool:
        """Tell whether ``cred`` may remove or reschedule ``pod`` (owner, then scope check)."""
        if pod["account_id"] != cred["account_id"]:
            return False
        return "manage" in cred["scopes"] or (cred["id"] is not None and pod["api_key_id"] == cred["id"])

    def template_by_id(self, template_id: str) -> dict[str, Any] | None:
        """Return the template with ``template_id``."""
        return next((t for t in self.templates if t["id"] == template_id), None)
