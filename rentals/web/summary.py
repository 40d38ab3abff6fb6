"""The rent page's order summary: the chosen nodes' count, GPUs and price, and their estimated time to ready."""

from __future__ import annotations

from decimal import Decimal

from accounts.models import UpstreamCredential
from rentals.estimates import ClusterEstimate, cluster_estimate_read, duration_text, template_id_resolve
from rentals.upstream.parse_offers import Fabric
from rentals.web.forms import RentForm


def rent_summary_build(
    fabric: Fabric, form: RentForm, *, credential: UpstreamCredential | None, template_id: object
) -> dict[str, object]:
    """Sum up the selected nodes: count, GPUs, price per hour and per day, and the estimated time to ready."""
    chosen_ids = set(form["executor_ids"].value() or [])
    chosen = [node for node in fabric.nodes if node.id in chosen_ids]
    per_hour = sum((node.price_per_hour for node in chosen), Decimal(0))
    estimate = _rent_estimate(credential, template_id, [node.id for node in chosen])
    return {
        "summary": {
            "nodes": len(chosen),
            "gpus": sum(node.gpu_count for node in chosen),
            "per_hour": per_hour,
            "per_day": per_hour * 24,
            "enough": len(chosen) >= 2,
            "estimate": estimate,
            "estimate_text": duration_text(estimate.seconds) if estimate else "",
        }
    }


def _rent_estimate(
    credential: UpstreamCredential | None, wanted: object, executor_ids: list[str]
) -> ClusterEstimate | None:
    """The chosen nodes' time to ready for the chosen template (else the newest); unknown when Lium does not say."""
    template_id = template_id_resolve(credential=credential, wanted=wanted)
    return cluster_estimate_read(credential=credential, template_id=template_id, executor_ids=executor_ids)
