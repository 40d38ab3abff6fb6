"""`GET /api/v1/usage?month=YYYY-MM`: the month's cost per rental and the total (a django-ninja Router).

Scoped like every other read (a member sees their customers' rentals, staff all), from the same selector as the
usage page and its CSV, so the three agree to the cent. Money and hours are decimal strings (exact).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Query, Router, Schema
from pydantic import Field

from accounts.audit import support_read_record
from api.auth import require_scope
from api.errors import ApiError
from api.representations import json_response
from api.schemas import ErrorOut
from billing.selectors import usage_for_user
from billing.usage import Month

router = Router(tags=["usage"])
ERRORS: dict[Any, Any] = {frozenset({400, 401, 403, 422, 429}): ErrorOut}


class UsageLineOut(Schema):
    id: str = Field(..., description="The rental's id.")
    pod_name: str
    customer_ref: str
    started: datetime = Field(..., description="When it started billing in this month (rented, or the 1st).")
    ended: datetime | None = Field(..., description="When it stopped in this month; null while it still runs.")
    hours: str = Field(..., description="Hours billed in this month (4 decimals).")
    price_per_hour: str = Field(..., description="USD/hour, as the order carried it.")
    cost_usd: str = Field(..., description="hours times price_per_hour, rounded to the cent.")
    estimate: bool = Field(..., description="True while it still runs (cost so far) or its price was unknown.")
    confirmed: bool = Field(
        ...,
        description="True when Lium's statement agreed, within a cent, with the cost of each of its pods on every "
        "UTC day of the line (checked daily for the previous days); false: our estimate.",
    )


class UsageOut(Schema):
    month: str
    as_of: datetime
    lines: list[UsageLineOut]
    total_usd: str = Field(..., description="The sum of the lines' cost_usd.")


@router.get("", response={200: UsageOut, **ERRORS}, url_name="usage", summary="Cost per rental in a month")
def usage(
    request: HttpRequest, month: str | None = Query(None, max_length=7), as_of: datetime | None = None
) -> HttpResponse:
    """One line per rental that billed in the month (default: this month), and the total, as of now.

    `as_of` (an ISO time with a zone, not in the future) computes the running clusters' cost at that moment
    instead, e.g. the `as_of` of an earlier answer or of the usage page, to compare them to the cent.
    """
    require_scope(request, "read")
    now = timezone.now()
    if as_of is not None and as_of.tzinfo is None:
        raise ApiError(422, "validation_error", "as_of: give a time zone, e.g. 2030-06-01T12:00:00Z.")
    if as_of is not None:
        # In UTC before it reaches the database: PostgreSQL refuses offsets beyond ±15:59 that Python accepts.
        try:
            as_of = as_of.astimezone(UTC)
        except OverflowError as exc:
            raise ApiError(422, "validation_error", "as_of: give a moment after the year 1 in UTC.") from exc
    try:
        chosen = Month.parse(month) if month else Month.of(timezone.now())
    except ValueError as exc:
        raise ApiError(422, "validation_error", f"month: {exc}") from exc
    report = usage_for_user(user=request.user, month=chosen, now=min(as_of, now) if as_of else now)
    support_read_record(user=request.user, customer_ids={line.customer_id for line in report.lines}, what="usage (API)")
    return json_response(
        {
            "month": report.month.label,
            "as_of": report.as_of,
            "lines": [
                {
                    "id": line.rental_id,
                    "pod_name": line.pod_name,
                    "customer_ref": line.customer_ref,
                    "started": line.started,
                    "ended": line.ended,
                    "hours": str(line.hours),
                    "price_per_hour": str(line.price_per_hour),
                    "cost_usd": str(line.cost_usd),
                    "estimate": line.estimate,
                    "confirmed": line.confirmed,
                }
                for line in report.lines
            ],
            "total_usd": str(report.total_usd),
        }
    )
