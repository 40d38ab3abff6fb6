"""The JSON shapes of rentals and fabrics (one place, so a stored idempotent answer matches a fresh one)."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.utils import timezone

from rentals.explanations import rental_explanation
from rentals.models import Rental
from rentals.upstream.parse_estimate import DeploymentEstimate
from rentals.upstream.parse_offers import Fabric, Node
from rentals.verification.records import fabric_check_dict


def rental_dict(rental: Rental) -> dict[str, Any]:
    error = None
    if rental.error_code or rental.error_message:
        error = {
            "code": rental.error_code,
            "message": rental.error_message,
            "hint": rental.error_hint,
            "request_id": rental.error_request_id,
        }
    return {
        "id": str(rental.public_id),
        "status": rental.status,
        "status_text": rental.get_status_display(),
        "explanation": rental_explanation(rental, now=timezone.now()).text,
        "customer": {"id": rental.customer_id, "name": rental.customer.name},
        "customer_ref": rental.customer_ref,
        "fabric_id": rental.fabric_id,
        "executor_ids": [str(x) for x in rental.executor_ids or []],
        "pod_name": rental.pod_name,
        "idempotency_key": str(rental.idempotency_key),
        "replayed": rental.replayed,
        "cluster_id": rental.cluster_id or None,
        "removal_scheduled_at": rental.removal_scheduled_at,
        "estimated_ready_seconds": rental.estimated_ready_seconds,
        "ready_seconds": rental.ready_seconds,
        "start_at": rental.start_at,
        "created_at": rental.created_at,
        "updated_at": rental.updated_at,
        "error": error,
        "fabric_check": fabric_check_dict(rental),
        "attempts": [
            {
                "number": attempt.number,
                "started_at": attempt.started_at,
                "duration_ms": attempt.duration_ms,
                "http_status": attempt.http_status,
                "classification": attempt.classification,
                "replayed": attempt.replayed,
                "request_id": attempt.request_id,
                "error_code": attempt.error_code,
            }
            for attempt in rental.attempts.all()
        ],
        "members": [
            {
                "rank": member.rank,
                "pod_id": member.pod_id,
                "overlay_ip": member.overlay_ip,
                "status": member.status,
                "phase": member.phase,
                "eta_seconds": member.eta_seconds,
                "ssh_command": member.ssh_command,
                "jupyter_url": member.jupyter_url,
                "ports_mapping": member.ports_mapping or {},
            }
            for member in rental.members.all()
        ],
    }


def fabric_dict(fabric: Fabric) -> dict[str, Any]:
    cheapest = fabric.cheapest_node_hour
    return {
        "fabric_id": fabric.fabric_id,
        "fabric_type": fabric.fabric_type,
        "link_rate": fabric.link_rate,
        "measured": fabric.measured,
        "node_count": fabric.node_count,
        "free_count": fabric.free_count,
        "gpu_type": fabric.gpu_type,
        "gpus_per_node": fabric.gpus_per_node,
        "cheapest_node_hour": str(cheapest) if cheapest is not None else None,
    }


def node_dict(node: Node, estimate: DeploymentEstimate | None = None) -> dict[str, Any]:
    """A free node, with Lium's estimate of its time to ready (null: unknown)."""
    return {
        "id": node.id,
        "machine_name": node.machine_name,
        "gpu_count": node.gpu_count,
        "available_gpu_count": node.available_gpu_count,
        "whole": node.whole,
        "price_per_gpu": str(node.price_per_gpu),
        "price_per_hour": str(node.price_per_hour),
        "location": node.location,
        "country_code": node.country_code,
        "reliability_score": node.reliability_score,
        "max_cuda_version": node.max_cuda_version,
        "nvlink": node.nvlink,
        "gpu_power_limited": node.gpu_power_limited,
        "last_verified_at": node.last_verified_at,
        "estimated_ready_seconds": estimate.seconds if estimate else None,
        "slow_machine": estimate.slow if estimate else None,
        "estimate_warning": estimate.warning if estimate and estimate.slow else "",
    }


def dumps(data: Any) -> str:
    return json.dumps(data, cls=DjangoJSONEncoder, separators=(",", ":"))


def json_response(data: Any, status: int = 200) -> HttpResponse:
    """Answer `data` as JSON, serialised as a stored idempotent answer is (`dumps`)."""
    return HttpResponse(dumps(data), status=status, content_type="application/json")
