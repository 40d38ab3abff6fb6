"""A rental's scheduled removal in the JSON API (a django-ninja Router, added to api.v1 at the root).

`POST /rentals/{id}/removal` with `{"hours": N}` (from now) or `{"at": "<ISO-8601 with zone>"}` sets or moves
it; `DELETE` cancels it. Scope `manage`; support gets 403, other customers' rentals 404. The work is
`rentals.removal.schedule`'s, as on the rental page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import ConfigDict, Field, StrictInt

from api.bodies import body_schema, json_body
from api.errors import ApiError
from api.rentals import rental_for, rental_to_change
from api.representations import json_response, rental_dict
from api.schemas import ERRORS, RentalOut
from rentals.removal import schedule as removal_schedule

router = Router()


class RemovalIn(Schema):
    """When to remove every member: `hours` from now, or `at` a time with its zone (within 720 hours)."""

    model_config = ConfigDict(extra="forbid")

    hours: Annotated[StrictInt, Field(ge=1, le=720)] | None = None
    at: datetime | None = Field(None, description="ISO-8601 with a zone, e.g. 2030-01-01T12:00:00Z.")


def _refused(exc: DjangoValidationError) -> ApiError:
    """Word a refused change: 409 when the rental's state forbids it, else 422 naming what to change."""
    code = exc.code or "invalid_removal"
    if code in ("no_cluster", "no_members"):
        return ApiError(409, code, exc.messages[0], hint="Wait until the cluster is rented and its members appear.")
    return ApiError(422, code, exc.messages[0], hint="Change the time and send the request again.")


@router.post(
    "/rentals/{rental_id}/removal",
    response={200: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Schedule or move a rental's removal",
    openapi_extra=body_schema(RemovalIn),
    operation_id="api_v1_rental_removal_set",
)
def rental_removal_set(request: HttpRequest, rental_id: str) -> HttpResponse:
    """Remove every member `hours` from now or `at` a time; the same time twice is one schedule."""
    rental = rental_to_change(request, rental_id)
    data = json_body(request.body, RemovalIn)
    try:
        removal_schedule.rental_schedule_removal(rental=rental, actor=request.user, hours=data.hours, at=data.at)  # type: ignore[arg-type]
    except DjangoValidationError as exc:
        raise _refused(exc) from exc
    return json_response(rental_dict(rental_for(request, rental_id)))


@router.delete(
    "/rentals/{rental_id}/removal",
    response={200: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Cancel a rental's scheduled removal",
    operation_id="api_v1_rental_removal_cancel",
)
def rental_removal_cancel(request: HttpRequest, rental_id: str) -> HttpResponse:
    """Cancel the scheduled removal (nothing scheduled: nothing to do); the cluster then runs until terminated."""
    rental = rental_to_change(request, rental_id)
    try:
        removal_schedule.rental_cancel_removal(rental=rental, actor=request.user)  # type: ignore[arg-type]
    except DjangoValidationError as exc:
        raise _refused(exc) from exc
    return json_response(rental_dict(rental_for(request, rental_id)))
