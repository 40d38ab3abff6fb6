"""Turn `GET /executors/deployment-estimate` into a `DeploymentEstimate` (upstream-api.md §17).

Strict like every answer (`rentals.upstream.parse`): `estimated_seconds` and `is_slow_machine` must be there with
their documented types; the other fields may be missing (the official client reads only the first three) but a
present one of the wrong type makes the whole answer `Unparseable`, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rentals.upstream.parse import Unparseable, json_object, text

ESTIMATE_MAX_SECONDS = 7 * 24 * 3600  # a week: anything longer is not an estimate of a container start
WARNING_MAX = 500
IMAGE_BYTES_MAX = 2**50  # a petabyte


@dataclass(frozen=True)
class DeploymentEstimate:
    """How long Lium expects a pod of one template to take to start on one executor."""

    seconds: int
    slow: bool
    warning: str  # "" when Lium gave none
    cached_template: bool
    image_bytes: int | None


def _whole(value: Any, what: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise Unparseable(f"{what} is not a whole number from 0 to {maximum}.")
    return value


def _flag(body: dict[str, Any], name: str, *, required: bool) -> bool:
    value = body.get(name)
    if value is None and not required:
        return False
    if not isinstance(value, bool):
        raise Unparseable(f"{name} is not true or false.")
    return value


def deployment_estimate(body: Any) -> DeploymentEstimate:
    """Read one estimate answer; raise Unparseable when it does not have the documented shape."""
    body = json_object(body, "The deployment estimate")
    warning = body.get("warning_message")
    if warning is not None and not isinstance(warning, str):
        raise Unparseable("warning_message is neither text nor null.")
    size = body.get("docker_image_size")
    return DeploymentEstimate(
        seconds=_whole(body.get("estimated_seconds"), "estimated_seconds", ESTIMATE_MAX_SECONDS),
        slow=_flag(body, "is_slow_machine", required=True),
        warning=text(warning, WARNING_MAX).strip(),
        cached_template=_flag(body, "is_cached_template", required=False),
        image_bytes=None if size is None else _whole(size, "docker_image_size", IMAGE_BYTES_MAX),
    )
