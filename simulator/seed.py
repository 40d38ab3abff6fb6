"""Deterministic demo data: fabrics with free nodes, templates, accounts and keys."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any

# Stable namespace so node and template ids survive restarts (tests rely on them).
NAMESPACE = uuid.UUID("5a1d0c1e-7c1a-4b5e-9d2f-1a2b3c4d5e6f")


@dataclass(frozen=True)
class FabricKind:
    """Describe one kind of fabric the generator cycles through."""

    temperature: str
    fabric_type: str
    locator: str
    machine_name: str
    gpus: int
    capacity_mib: int
    price_per_gpu: float
    link_rate: str | None
    measured: bool
    free: int
    reserved: int
    location: tuple[str, str, str]
    interconnect: str
    nvlink: bool


KINDS = [
    FabricKind(
        "hot",
        "infiniband",
        "0x3:0x7fff",
        "NVIDIA H100 80GB HBM3",
        8,
        81559,
        2.10,
        "400 Gb/sec (4X NDR)",
        True,
        8,
        4,
        ("United States", "US", "Dallas"),
        "SXM5",
        True,
    ),
    FabricKind(
        "hot",
        "infiniband",
        "0x5:0x8001",
        "NVIDIA A100-SXM4-80GB",
        8,
        81920,
        1.20,
        "200 Gb/sec (4X HDR)",
        True,
        6,
        0,
        ("Germany", "DE", "Frankfurt"),
        "SXM4",
        True,
    ),
    FabricKind(
        "cold",
        "roce",
        "10.0.0.0/24",
        "NVIDIA GeForce RTX 4090",
        8,
        24564,
        0.35,
        "100 Gb/sec",
        False,
        16,
        4,
        ("Canada", "CA", "Montreal"),
        "PCIe",
        False,
    ),
    FabricKind(
        "hot",
        "infiniband",
        "0x9:0x7ffe",
        "NVIDIA H200",
        8,
        143771,
        3.05,
        "400 Gb/sec (4X NDR)",
        True,
        2,
        2,
        ("Finland", "FI", "Helsinki"),
        "SXM5",
        True,
    ),
]

PHASES = [
    "queued",
    "preparing node",
    "connecting to node",
    "pulling image",
    "creating volume",
    "starting container",
    "mounting encrypted volume",
    "configuring ssh",
]


def stable_uuid(*parts: object) -> str:
    """Derive a uuid that depends only on ``parts``."""
    return str(uuid.uuid5(NAMESPACE, ":".join(str(p) for p in parts)))


def fabric_id(kind: FabricKind, index: int) -> str:
    """Build a composite fabric id like the upstream's; later copies get a distinct locator."""
    locator = kind.locator
    if index >= len(KINDS):
        gen = index // len(KINDS)
        locator = (
            f"0x{gen + 0x10:x}:0x{0x7000 + index:x}"
            if kind.fabric_type == "infiniband"
            else f"10.{gen}.{index % 256}.0/24"
        )
    return f"{kind.temperature}:{kind.fabric_type}:{locator}:{kind.machine_name}:{kind.gpus}"


def make_node(kind: FabricKind, fabric_index: int, node_index: int, seed: int) -> dict[str, Any]:
    """Build one executor row (the offers' node shape) for a fabric."""
    # Small deterministic price spread so "the N cheapest nodes" is meaningful.
    price = round(kind.price_per_gpu + 0.01 * ((node_index * 7 + fabric_index) % 5), 2)
    country, code, city = kind.location
    octet3, octet4 = divmod(fabric_index * 64 + node_index, 250)
    return {
        "id": stable_uuid("node", seed, fabric_index, node_index),
        "executor_ip_address": f"198.18.{octet3 % 256}.{octet4 + 1}",
        "machine_name": kind.machine_name,
        "gpu_count": kind.gpus,
        "price_per_gpu": price,
        "location": {"country": country, "country_code": code, "city": city},
        "status": "online",
        "tier": "secure" if node_index % 4 else "spot",
        "specs": {
            "gpu": {
                "count": kind.gpus,
                "details": [{"name": kind.machine_name, "capacity": kind.capacity_mib}] * kind.gpus,
                "driver": "550.127.05",
            },
            "cpu": {"count": 192 if kind.gpus == 8 else 64},
            "ram": {"total": 2113929216},
            "hard_disk": {"free": 7516192768, "total": 8589934592},
            "sysbox_runtime": True,
            "available_port_count": 40,
            "interconnect": kind.fabric_type,
        },
        "available_gpu_count": kind.gpus,
        "min_gpu_count_for_rental": None,
        "interconnect": kind.interconnect,
        "nvlink": kind.nvlink,
        "effective_upload_speed_mbps": 9400 - (node_index % 7) * 100,
        "effective_download_speed_mbps": 9800 - (node_index % 5) * 100,
        "max_cuda_version": "12.4",
        "reliability_score": 99 - (node_index % 6),
        "frequent_rent_failures": False,
        "last_verified_at": "2025-11-28T12:00:00.000Z",
        "gpu_power_limited": False,
        "gpu_power_limit_w": None,
    }


def build_fabrics(seed: int, count: int, nodes_per_fabric: int | None) -> list[dict[str, Any]]:
    """Generate ``count`` fabrics; each is {offer fields..., "nodes": [...], "reserved": n}."""
    fabrics = []
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        free = nodes_per_fabric if nodes_per_fabric is not None else kind.free
        nodes = [make_node(kind, index, n, seed) for n in range(free)]
        if index == 2 and nodes_per_fabric is None and nodes:
            # A GPU-split host still listed as free: renting it breaks "whole nodes only".
            split = nodes[-1]
            split["available_gpu_count"] = 4
            split["price_per_gpu"] = round(kind.price_per_gpu + 0.2, 2)
        fabrics.append(
            {
                "fabric_id": fabric_id(kind, index),
                "fabric_type": kind.fabric_type,
                "link_rate": kind.link_rate,
                "fabric_measured": kind.measured,
                "index": index,
                "kind": kind,
                "next_node": free,
                "reserved": kind.reserved,
                "nodes": nodes,
            }
        )
    return fabrics


CLUSTER_IMAGE = "daturaai/lium-cluster"


def build_templates() -> list[dict[str, Any]]:
    """Return the template list; two numbered cluster tags so "newest tag" matters."""
    rows = [
        ("lium-cluster 0.0.7", CLUSTER_IMAGE, "0.0.7", "cluster"),
        ("lium-cluster 0.0.10", CLUSTER_IMAGE, "0.0.10", "cluster"),
        ("lium-cluster latest", CLUSTER_IMAGE, "latest", "cluster"),
        ("PyTorch 2.4", "daturaai/pytorch", "2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04", "pytorch"),
        ("Ubuntu 22.04", "daturaai/ubuntu", "22.04", "os"),
        ("vLLM", "vllm/vllm-openai", "v0.6.3", "inference"),
    ]
    return [
        {
            "id": stable_uuid("template", image, tag),
            "name": name,
            "docker_image": image,
            "docker_image_tag": tag,
            "category": category,
            "status": "VERIFY_SUCCESS",
            "supports_volume_encryption": True,
            "user_id": None,
            "internal_ports": [22],
            "is_private": False,
        }
        for name, image, tag, category in rows
    ]


def _api_key(
    kid: str | None,
    name: str | None,
    secret: str,
    account: str,
    scopes: list[str],
    visibility: str = "account",
    customer_ref: str | None = None,
    budget: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Return one API key credential (a session token has no id or name); `budget` is (limit, spent) in USD."""
    return {
        "kind": "api_key",
        "id": kid,
        "name": name,
        "secret": secret,
        "account_id": account,
        "scopes": scopes,
        "visibility": visibility,
        "customer_ref": customer_ref,
        "max_budget_usd": budget[0] if budget else None,
        "spent_total_usd": budget[1] if budget else 0.0,
    }


def build_accounts() -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Return (accounts by id, credentials); the demo secrets are documented, not secret."""
    accounts = {
        account_id: {"id": account_id, "email": email, "name": name, "balance": balance}
        for account_id, email, name, balance in (
            ("acct-main", "demo@sim.local", "Demo account", 5000.0),
            ("acct-poor", "poor@sim.local", "Poor account", 0.5),
            ("acct-other", "other@sim.local", "Other account", 5000.0),
        )
    }

    full = ["read", "rent", "manage"]
    creds = [
        _api_key("key-main", "dashboard", os.environ.get("LIUM_SIM_API_KEY") or "sim-demo-key", "acct-main", full),
        _api_key("key-readonly", "readonly", "sim-readonly-key", "acct-main", ["read"]),
        _api_key("key-capped", "capped", "sim-capped-key", "acct-main", full, budget=(10.0, 10.0)),
        _api_key(
            "key-acme",
            "acme",
            "sim-acme-key",
            "acct-main",
            ["read", "rent"],
            visibility="own",
            customer_ref="acme-from-key",
        ),
        _api_key("key-poor", "poor", "sim-poor-key", "acct-poor", full),
        _api_key("key-other", "other", "sim-other-key", "acct-other", full),
        # The portal's session token: no key id or name, every scope.
        {**_api_key(None, None, "sim-demo-token", "acct-main", [*full, "billing"]), "kind": "bearer"},
    ]
    return accounts, creds
