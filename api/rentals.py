"""Rentals in the JSON API (a django-ninja Router, added to api.v1 at the root): list, get, rent, terminate.

Every read goes through the scoped selectors of `rentals.selectors` (a member gets 404 for another
customer's rental), every write through `rentals.services`. Operation ids name the module the routes were
first written in (`api.v1`), so clients generated from the schema keep their method names.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Header, Query, Router

from accounts.models import customer_ref_validator
from accounts.roles import is_operator
from accounts.users import request_user
from api import idempotency
from api.auth import require_scope, require_writer
from api.bodies import body_schema, json_body
from api.errors import ApiError, error_response
from api.fabrics import upstream_refusal
from api.representations import dumps, json_response, rental_dict
from api.schemas import ERRORS, RentalCreateIn, RentalListOut, RentalOut
from rentals import offers, selectors, services
from rentals.audit import support_reads
from rentals.cursors import InvalidCursor, rentals_older_than, rentals_page
from rentals.explanations import members_grace_text
from rentals.lium_switch import SWITCH_OFF_CODE
from rentals.models import Rental
from rentals.orders.order import OPTIONS
from rentals.orders.service import OrderChoice, OrderRefused, order_check, order_save
from rentals.states import RentalStatus
from rentals.upstream import UpstreamError

router = Router()

StatusFilter = Literal[tuple(RentalStatus.values)]  # type: ignore[valid-type]


def _aware(value: datetime, name: str) -> datetime:
    try:
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise ApiError(422, "validation_error", f"{name}: the date is out of range.") from exc


def _with_details(rentals: QuerySet[Rental]) -> QuerySet[Rental]:
    return rentals.select_related("fabric_check").prefetch_related("attempts", "members")


@router.get(
    "/rentals",
    response={200: RentalListOut, **ERRORS},
    tags=["rentals"],
    summary="List rentals",
    operation_id="api_v1_rental_list",
)
def rental_list(
    request: HttpRequest,
    status: StatusFilter | None = None,  # type: ignore[valid-type]
    customer_ref: str | None = Query(None, max_length=64),
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = Query(25, ge=1, le=100),
    cursor: str | None = Query(None, max_length=200),
) -> HttpResponse:
    """The rentals you may see, newest first. Page with `next_cursor`."""
    require_scope(request, "read")
    rentals = selectors.rental_list_for_user(user=request.user)
    if status:
        rentals = rentals.filter(status=status)
    if customer_ref:
        try:
            customer_ref_validator(customer_ref)
        except DjangoValidationError as exc:
            raise ApiError(422, "validation_error", f"customer_ref: {exc.messages[0]}") from exc
        rentals = rentals.filter(customer_ref=customer_ref)
    if created_after is not None:
        rentals = rentals.filter(created_at__gte=_aware(created_after, "created_after"))
    if created_before is not None:
        rentals = rentals.filter(created_at__lt=_aware(created_before, "created_before"))
    rentals = rentals.order_by("-created_at", "-id")
    if cursor:
        try:
            rentals = rentals_older_than(rentals, cursor)
        except InvalidCursor as exc:
            hint = "Use next_cursor from the previous page as is."
            raise ApiError(422, "invalid_cursor", "The cursor is not valid.", hint=hint) from exc
    page, next_cursor = rentals_page(_with_details(rentals), limit=limit)
    support_reads(user=request.user, rentals=page, where="rental list (API)")
    return json_response({"items": [rental_dict(rental) for rental in page], "next_cursor": next_cursor})


def rental_for(request: HttpRequest, rental_id: str) -> Rental:
    """Return a rental the user may see, or a 404 envelope (which never says whether it exists)."""
    try:
        public_id = uuid.UUID(rental_id)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ApiError(404, "not_found", "No such rental.") from exc
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)  # Http404: the 404 envelope
    return _with_details(Rental.objects.select_related("customer")).get(pk=rental.pk)


def rental_to_change(request: HttpRequest, rental_id: str) -> Rental:
    """Return the rental if this key's user may change it (scope, role and customer checked)."""
    require_writer(request, "manage")
    rental, user = rental_for(request, rental_id), request_user(request)
    if not is_operator(user) and not rental.customer.memberships.filter(user_id=user.pk).exists():
        raise ApiError(403, "forbidden", "You may not change this rental.")
    return rental


@router.get(
    "/rentals/{rental_id}",
    response={200: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Get a rental",
    operation_id="api_v1_rental_get",
)
def rental_get(request: HttpRequest, rental_id: str) -> HttpResponse:
    """One rental with its attempts and members."""
    require_scope(request, "read")
    rental = rental_for(request, rental_id)
    support_reads(user=request.user, rentals=[rental])
    return json_response(rental_dict(rental))


@router.post(
    "/rentals/{rental_id}/terminate",
    response={202: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Terminate a rental's cluster",
    operation_id="api_v1_rental_terminate",
)
def rental_terminate(request: HttpRequest, rental_id: str) -> HttpResponse:
    """Start removing the cluster; the rental moves to `terminating`, then `terminated`.

    A rental whose cluster id is not known yet (`cluster_id` is null: Lium has not listed its nodes) answers
    409 `cluster_not_known_yet`: wait until its nodes appear and try again, or, when they have not appeared
    within the grace (its `explanation` says so), ask support to reconcile it.
    """
    rental, user = rental_to_change(request, rental_id), request_user(request)
    if rental.status == RentalStatus.TERMINATING:
        return json_response(rental_dict(rental), status=202)
    try:
        # An operator's terminate is recorded as a staff action (`rentals.audit`), as on the ops pages.
        moved = services.rental_terminate(rental=rental, actor=user, reason="Requested through the API.")
    except DjangoValidationError as exc:
        raise ApiError(409, "cluster_not_known_yet", exc.messages[0], hint=_cluster_unknown_hint(rental)) from exc
    if not moved:
        raise ApiError(
            409,
            "not_terminable",
            f"A rental in state '{rental.status}' has no cluster to remove.",
            hint="Only rented, ready or degraded rentals can be terminated.",
        )
    return json_response(rental_dict(rental_for(request, rental_id)), status=202)


def _cluster_unknown_hint(rental: Rental) -> str:
    """Say what to do about a rental whose cluster id is not known: wait for its nodes, or have it reconciled."""
    grace = members_grace_text()
    if selectors.rental_members_overdue(rental=rental, now=timezone.now()):
        return (
            f"Its nodes have not appeared within {grace}. Support has been alerted and can reconcile it (find the "
            f"cluster at Lium); ask them, quoting idempotency_key {rental.idempotency_key}."
        )
    return f"Its nodes usually appear within {grace}; try again once GET /api/v1/rentals/{{id}} shows a cluster_id."


@router.post(
    "/rentals",
    response={201: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Rent a cluster",
    openapi_extra=body_schema(RentalCreateIn),
    operation_id="api_v1_rental_create",
)
def rental_create(
    request: HttpRequest,
    idempotency_key: str | None = Header(
        None,
        alias="Idempotency-Key",
        description="Repeat the order safely: same key and identical body within 24 h replays the first answer.",
    ),
) -> HttpResponse:
    """Save an all-or-nothing cluster order; a worker sends it to Lium. Poll `GET /rentals/{id}` for progress."""
    require_writer(request, "rent")
    raw = request.body
    record = None
    if idempotency_key is not None:
        idempotency.idempotency_key_validate(idempotency_key)
        claim = idempotency.idempotency_begin(
            user=request_user(request), key=idempotency_key, body_sha256=hashlib.sha256(raw).hexdigest()
        )
        if isinstance(claim, idempotency.Replay):
            response = HttpResponse(claim.body, status=claim.status, content_type="application/json")
            response["Idempotent-Replayed"] = "true"
            return response
        record = claim
    try:
        rental, body = _order_save(request, raw, record)
    except idempotency.LostIdempotencyLock:
        return _lost_lock_response(request)
    except OrderRefused as refused:
        return _refusal_answer(request, order_refusal(refused), record)
    except ApiError as error:
        return _refusal_answer(request, error, record)
    except BaseException:
        if record is not None:
            idempotency.idempotency_abandon(record=record)
        raise
    if rental.start_at is None:  # a scheduled rental's nodes stay free for others until its time
        offers.offers_take(credential=rental.credential, node_ids=rental.executor_ids)
    return HttpResponse(body, status=201, content_type="application/json")


def _order_save(request: HttpRequest, raw: bytes, record: Any) -> tuple[Rental, str]:
    """Hand the order to the order service and store the answer under its idempotency key in one transaction."""
    data = json_body(raw, RentalCreateIn)
    choice = OrderChoice(
        customer=data.customer,
        customer_ref=data.customer_ref,
        fabric_id=data.fabric_id,
        executor_ids=data.executor_ids,
        node_count=data.node_count,
        template_id=data.template_id,
        pod_name=data.pod_name,
        public_keys=data.ssh_public_keys,
        options=data.model_dump(include=set(OPTIONS)),
        verify_fabric=data.verify_fabric,
        start_at=data.start_at,
    )
    try:
        checked = order_check(user=request_user(request), choice=choice)  # outside the transaction: it may call Lium
    except UpstreamError as exc:
        raise upstream_refusal(exc) from exc
    with transaction.atomic():
        rental = order_save(user=request_user(request), checked=checked)
        rental = _with_details(Rental.objects.select_related("customer")).get(pk=rental.pk)
        body = dumps(rental_dict(rental))
        if record is not None:
            idempotency.idempotency_finish(record=record, status=201, body=body)
    return rental, body


def order_refusal(exc: OrderRefused) -> ApiError:
    """Return the envelope of a refused order: the field at fault (403 for a customer_ref only operators may set)."""
    if exc.code == SWITCH_OFF_CODE:  # not the order's fault: 503 frees its Idempotency-Key for a later try
        retry = str(settings.LIUM_SWITCH_READ_SECONDS)
        hint = "Nothing was saved; send the order again once Lium switches cluster renting back on."
        return ApiError(503, exc.code, exc.message, hint=hint, headers={"Retry-After": retry})
    if exc.field is None:
        return ApiError(422, exc.code, exc.message, hint="Change the order and try again.", details=exc.details)
    return ApiError(
        403 if exc.code == "customer_ref_not_allowed" else 422,
        exc.code,
        f"{exc.field}: {exc.message}",
        hint="Fix this field and send the request again.",
        validation_errors=[{"field": exc.field, "message": exc.message}],
    )


def _refusal_answer(request: HttpRequest, error: ApiError, record: Any) -> HttpResponse:
    """Answer a refused order; under an idempotency key a refusal is stored as this request's answer (as the
    upstream does), while a 5xx frees the key for a retry."""
    response = error_response(request, error)
    if record is None:
        return response
    if error.status >= 500:
        idempotency.idempotency_abandon(record=record)
        return response
    try:
        idempotency.idempotency_finish(record=record, status=error.status, body=response.content.decode())
    except idempotency.LostIdempotencyLock:
        return _lost_lock_response(request)
    return response


def _lost_lock_response(request: HttpRequest) -> HttpResponse:
    """This request ran past the key's lock and a repeat took the key over; its rental was rolled back."""
    return error_response(
        request,
        ApiError(
            409,
            "idempotency_in_progress",
            "A repeat of this request took over its Idempotency-Key; this one created nothing.",
            hint="Repeat the same request to get the answer of the one that holds the key.",
            headers={"Retry-After": "1"},
        ),
    )
