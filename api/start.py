"""A scheduled rental's start in the JSON API (a django-ninja Router, added to api.v1 at the root).

`POST /rentals/{id}/start` with `{"start_at": "<ISO-8601 with zone>"}` moves the start of a `scheduled` rental;
`POST /rentals/{id}/cancel` cancels a rental not sent yet (`scheduled` or `queued`). Scope `manage`; support gets
403, other customers' rentals 404; a rental past that point 409. The work is `rentals.orders.scheduled`'s and
`rentals.services`', as on the rental page.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import ConfigDict, Field

from accounts.users import request_user
from api.bodies import body_schema, json_body
from api.errors import ApiError
from api.rentals import rental_for, rental_to_change
from api.representations import json_response, rental_dict
from api.schemas import ERRORS, RentalOut
from rentals import services
from rentals.orders import scheduled

router = Router()


class StartIn(Schema):
    model_config = ConfigDict(extra="forbid")

    start_at: datetime = Field(..., description="ISO-8601 with a zone, in the future, at most SCHEDULE_MAX_DAYS ahead.")


@router.post(
    "/rentals/{rental_id}/start",
    response={200: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Move a scheduled rental's start",
    openapi_extra=body_schema(StartIn),
    operation_id="api_v1_rental_start_set",
)
def rental_start_set(request: HttpRequest, rental_id: str) -> HttpResponse:
    """Move the start time of a rental that is still `scheduled`."""
    rental = rental_to_change(request, rental_id)
    data = json_body(request.body, StartIn)
    try:
        moved = scheduled.rental_reschedule(rental=rental, start_at=data.start_at, actor=request_user(request))
    except DjangoValidationError as exc:
        raise ApiError(
            422,
            "invalid_start_at",
            f"start_at: {exc.messages[0]}",
            hint="Change the time and send the request again.",
        ) from exc
    if not moved:
        raise ApiError(409, "not_scheduled", f"A rental in state '{rental.status}' has no start to move.")
    return json_response(rental_dict(rental_for(request, rental_id)))


@router.post(
    "/rentals/{rental_id}/cancel",
    response={200: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Cancel a rental not sent yet",
    operation_id="api_v1_rental_cancel",
)
def rental_cancel(request: HttpRequest, rental_id: str) -> HttpResponse:
    """Cancel a `scheduled` or `queued` rental: nothing is rented."""
    rental = rental_to_change(request, rental_id)
    if not services.rental_cancel(rental=rental, actor=request_user(request), reason="Requested through the API."):
        raise ApiError(409, "not_cancellable", f"A rental in state '{rental.status}' was sent already.")
    return json_response(rental_dict(rental_for(request, rental_id)))
