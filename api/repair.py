"""Member repair in the JSON API (a django-ninja Router, added to api.v1 at the root).

`POST /rentals/{id}/members/{rank}/reboot` and `/reset-gpu`, body `{}` or `{"reason": "..."}`: scope `manage`;
support gets 403, other customers' rentals 404. The answer is 202 with what was asked; the request then shows
on the rental's timeline and page (`rentals.repair.services`, as the page's buttons). An `Idempotency-Key` header names
the click: the same key again answers the same request without a second call to Lium.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import ConfigDict, Field, StrictStr

from accounts.users import request_user
from api.bodies import body_schema, json_body
from api.errors import ApiError
from api.rentals import rental_to_change
from api.representations import json_response
from api.schemas import ERRORS
from rentals.models import RentalEvent
from rentals.repair import services as repair

router = Router()

STATUS_OF = {"invalid_rank": 422, "member_not_running": 409, "not_repairable": 409, "repair_in_progress": 409}
HINT_OF = {
    "invalid_rank": "Use a rank from the rental's `members`.",
    "member_not_running": "Wait until the member runs again (its `status` in GET /rentals/{id}).",
    "not_repairable": "Only a rented, ready or degraded rental's running members can be repaired.",
    "repair_in_progress": "Follow it on the rental's timeline; ask again once it has ended.",
}


class RepairIn(Schema):
    """Why (optional, on the timeline)."""

    model_config = ConfigDict(extra="forbid")

    reason: Annotated[StrictStr, Field(max_length=1000)] = ""


class RepairOut(Schema):
    rental_id: str
    rank: int | None
    pod_id: str
    action: str
    status: str
    reason: str
    asked_at: datetime
    asked_by: str
    replayed: bool


REPAIR_BODY = body_schema(RepairIn, required=False)


def _ask(request: HttpRequest, rental_id: str, rank: str, action: str) -> HttpResponse:
    rental = rental_to_change(request, rental_id)
    data = json_body(request.body, RepairIn) if request.body.strip() else RepairIn()
    user = request_user(request)
    key = request.headers.get("Idempotency-Key", "").strip()[:64]
    token = f"api:{user.pk if user else ''}:{key}" if key else ""
    try:
        event, created = repair.member_repair_ask(
            rental=rental, rank=rank, action=action, actor=user, reason=data.reason, token=token
        )
    except DjangoValidationError as exc:
        raise _refused(exc) from exc
    return json_response(_repair_dict(rental.public_id, event, replayed=not created), status=202)


def _refused(exc: DjangoValidationError) -> ApiError:
    code = exc.code or "invalid_repair"
    if code == "reset_rate_limited":
        seconds = str((exc.params or {}).get("seconds", repair.RESET_INTERVAL_SECONDS))
        return ApiError(429, code, exc.messages[0], hint="Try again then.", headers={"Retry-After": seconds})
    return ApiError(STATUS_OF.get(code, 422), code, exc.messages[0], hint=HINT_OF.get(code, ""))


def _repair_dict(public_id: object, event: RentalEvent, *, replayed: bool) -> dict[str, object]:
    data = event.data
    return {
        "rental_id": str(public_id),
        "rank": data.get("rank"),
        "pod_id": data.get("pod_id", ""),
        "action": "reboot" if data.get("repair") == repair.REBOOT else "reset-gpu",
        "status": data.get("state", ""),
        "reason": data.get("reason", ""),
        "asked_at": event.at,
        "asked_by": event.actor.get_username() if event.actor else "",
        "replayed": replayed,
    }


@router.post(
    "/rentals/{rental_id}/members/{rank}/reboot",
    response={202: RepairOut, **ERRORS},
    tags=["rentals"],
    summary="Reboot one member of a rental's cluster",
    openapi_extra=REPAIR_BODY,
    operation_id="api_v1_member_reboot",
)
def member_reboot(request: HttpRequest, rental_id: str, rank: str) -> HttpResponse:
    """Reboot the running member of `rank` (Lium's pod reboot): it shows `REBOOT_PENDING`, then `RUNNING` again
    (or `REBOOT_FAILED`, and the rental `degraded`). One click, one call to Lium."""
    return _ask(request, rental_id, rank, repair.REBOOT)


@router.post(
    "/rentals/{rental_id}/members/{rank}/reset-gpu",
    response={202: RepairOut, **ERRORS},
    tags=["rentals"],
    summary="Reset every GPU of one member of a rental's cluster",
    openapi_extra=REPAIR_BODY,
    operation_id="api_v1_member_reset_gpu",
)
def member_reset_gpu(request: HttpRequest, rental_id: str, rank: str) -> HttpResponse:
    """Reset the GPUs of the running member of `rank` (Lium's reset-gpu); each GPU's result lands on the rental's
    timeline. Lium allows one reset a minute per node: sooner answers 429 with `Retry-After`."""
    return _ask(request, rental_id, rank, repair.RESET_GPU)
