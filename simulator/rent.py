"""Validate and commit a cluster rent order (all or nothing)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from . import event_log
from .errors import ApiError, field_error
from .estimates import start_delay
from .seed import CLUSTER_IMAGE
from .state import State
from .validation import POD_NAME_RE, ssh_key_problem, tag_key

ETA_BASES = ["executor_history", "class_median", "cold_pull_estimate", "fleet_default"]


def parse_body(raw: bytes) -> dict[str, Any]:
    """Decode the JSON object body, else 422 invalid_json."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(422, "invalid_json", f"Request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_json", "Request body must be a JSON object")
    return body


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(state: State, body: dict[str, Any]) -> dict[str, Any]:
    """Check every rule; return the resolved order (nodes, fabric, template) or raise."""
    _check_fields(body)
    template = _resolve_template(state, body.get("template_id"))
    nodes = _resolve_nodes(state, body["executor_uuids"], gpu_count=body.get("gpu_count"))
    price = round(sum(n["price_per_gpu"] * n["gpu_count"] for _, n in nodes), 4)
    return {
        "name": body["pod_name"],
        "nodes": nodes,
        "template": template,
        "price": price,
        "hours": body.get("termination_hours"),
        "encryption": body.get("enable_volume_encryption", True) is not False,
        "jupyter": body.get("enable_jupyter") is True,
        "keys": [key.strip() for key in body["user_public_key"]],
    }


def _check_fields(body: dict[str, Any]) -> None:
    """Check each field's shape and range, in the order the API reports them."""
    name = body.get("pod_name")
    if not isinstance(name, str) or not name:
        raise field_error("pod_name", "is required and must be a non-empty string")
    if not POD_NAME_RE.match(name):
        raise field_error("pod_name", "must be 1-64 characters of A-Z a-z 0-9 . _ - and start with a letter or digit")
    uuids = body.get("executor_uuids")
    if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
        raise field_error("executor_uuids", "is required and must be a list of executor ids")
    if len(uuids) < 2:
        raise field_error("executor_uuids", "a cluster needs at least 2 nodes", code="cluster_too_small")
    if len(set(uuids)) != len(uuids):
        raise field_error("executor_uuids", "contains duplicate executor ids", code="duplicate_executors")
    if body.get("dockerfile_content") not in (None, ""):
        raise ApiError(
            400,
            "dockerfile_not_supported",
            "dockerfile_content is not supported on a cluster rental",
            hint="Clusters run the daturaai/lium-cluster image only.",
        )
    keys = body.get("user_public_key")
    if not isinstance(keys, list) or not keys:
        raise field_error("user_public_key", "must be a non-empty list of OpenSSH public keys")
    for i, key in enumerate(keys):
        problem = ssh_key_problem(key)
        if problem:
            raise field_error(f"user_public_key[{i}]", problem, code="invalid_ssh_key")
    hours = body.get("termination_hours")
    if hours is not None and (not _is_int(hours) or not 1 <= hours <= 720):
        raise field_error("termination_hours", "must be an integer from 1 to 720", code="invalid_termination_hours")
    gpu_count = body.get("gpu_count")
    if gpu_count is not None and not _is_int(gpu_count):
        raise field_error("gpu_count", "must be an integer or null")
    ports = body.get("initial_port_count")
    if ports is not None and (not _is_int(ports) or not 0 <= ports <= 64):
        raise field_error("initial_port_count", "must be an integer from 0 to 64 or null")


def _resolve_template(state: State, template_id: Any) -> dict[str, Any]:
    """Return the order's template (the newest cluster one by default); it must run the cluster image."""
    if template_id is None:  # the cluster template with the newest tag, as the SDK picks it
        cluster_templates = [t for t in state.templates if t["docker_image"].startswith(CLUSTER_IMAGE)]
        template = max(cluster_templates, key=lambda t: tag_key(t.get("docker_image_tag")), default=None)
        if template is None:
            raise ApiError(404, "template_not_found", "No cluster template is available")
    else:
        template = state.template_by_id(template_id) if isinstance(template_id, str) else None
        if template is None:
            raise ApiError(404, "template_not_found", f"Template {template_id} not found")
    if not template["docker_image"].startswith(CLUSTER_IMAGE):
        raise ApiError(
            400,
            "cluster_image_required",
            f"A cluster rental must use the {CLUSTER_IMAGE} image, not {template['docker_image']}",
            hint="Pick the newest daturaai/lium-cluster template from GET /templates.",
        )
    return template


def _resolve_nodes(state: State, uuids: list[str], *, gpu_count: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Return each (fabric, node) ordered: known, on one fabric, free, and taken whole."""
    nodes = []
    for node_id in uuids:
        found = state.nodes.get(node_id)
        if found is None:
            raise ApiError(404, "executor_not_found", f"Executor {node_id} not found")
        nodes.append(found)
    fabric_ids = {fab["fabric_id"] for fab, _ in nodes}
    if len(fabric_ids) > 1:
        raise ApiError(
            400,
            "mixed_fabrics",
            f"mixed fabrics: the nodes are on {len(fabric_ids)} fabrics; a cluster must be on one fabric",
        )
    for _, node in nodes:
        if node["id"] in state.rented or node["id"] in state.config["taken_executors"]:
            raise ApiError(
                409,
                "executor_not_available",
                f"Executor {node['id']} is not free",
                hint="Refresh GET /executors/infiniband-clusters and pick free nodes.",
            )
    for _, node in nodes:
        if node["available_gpu_count"] != node["gpu_count"] or (
            gpu_count is not None and gpu_count != node["gpu_count"]
        ):
            raise ApiError(
                400,
                "whole_nodes_only",
                "A cluster rental must take whole nodes",
                hint="Leave gpu_count null and choose nodes with every GPU free.",
            )
    return nodes


def check_balance(state: State, cred: dict[str, Any], price: float) -> None:
    """Refuse with 403 insufficient_balance when the first hour is not covered."""
    balance = state.accounts[cred["account_id"]]["balance"]
    if balance < price:
        raise ApiError(
            403,
            "insufficient_balance",
            f"Insufficient balance: this cluster requires at least ${price:.2f} for the first hour. "
            f"Your balance is ${balance:.2f}.",
            hint="Top up the account.",
        )


def commit(
    state: State,
    cred: dict[str, Any],
    order: dict[str, Any],
    customer_ref: str | None,
    fail_ranks: dict[int, str],
) -> dict[str, Any]:
    """Create every member at once; return the success body (caller holds the lock)."""
    now = state.clock.now()
    cluster_id = str(uuid.uuid4())  # random, so ids never repeat across resets
    template = order["template"]
    pod_ids = []
    for rank, (fab, node) in enumerate(order["nodes"]):
        pod_id = str(uuid.uuid4())
        pod = {
            "id": pod_id,
            "pod_name": order["name"],
            "status": "PENDING",
            "account_id": cred["account_id"],
            "api_key_id": cred["id"],
            "api_key_name": cred["name"],
            "customer_ref": customer_ref,
            "cluster_id": cluster_id,
            "cluster_node_index": rank,
            "cluster_overlay_ip": f"10.42.0.{rank + 1}",
            "executor": dict(node),
            "node_id": node["id"],
            "fabric_id": fab["fabric_id"],
            "price": round(node["price_per_gpu"] * node["gpu_count"], 4),
            "gpu_count": node["gpu_count"],
            "template": {k: template[k] for k in ("id", "name", "docker_image", "docker_image_tag")} | {"volumes": []},
            "created_at": now,
            "updated_at": now,
            "ready_at": now + start_delay(state, node["id"]),
            "will_fail": fail_ranks.get(rank),
            "removal_scheduled_at": now + order["hours"] * 3600 if order["hours"] else None,
            "port": state.new_port(),
            # With Jupyter: its host port (mapped from 8888) and the token in its URL, like a real pod's.
            "jupyter_port": state.new_port() if order["jupyter"] else None,
            "jupyter_token": uuid.uuid4().hex if order["jupyter"] else None,
            "eta_basis": ETA_BASES[fab["index"] % len(ETA_BASES)],  # stable per fabric; every value shows somewhere
            "enable_volume_encryption": order["encryption"],
            "deleting_until": None,
            "authorized_keys": list(order["keys"]),  # root's ~/.ssh/authorized_keys on the pod
        }
        state.pods[pod_id] = pod
        state.rented[node["id"]] = pod_id
        actor = event_log.actor_of(cred)
        state.add_event(pod, "created", f"Cluster member {rank} created on {node['machine_name']}", now, actor=actor)
        if state.config["replenish"]:
            state.replenish(fab)
        pod_ids.append(pod_id)
    if cred["id"] is not None:
        cred["spent_total_usd"] = round(cred.get("spent_total_usd", 0.0) + order["price"], 4)
    return {
        "success": True,
        "pod_ids": pod_ids,
        "cluster_id": cluster_id,
        "message": f"Cluster of {len(pod_ids)} nodes is being created",
    }
