"""JSON API v1 (django-ninja), mounted at /api/v1/: schema at /api/v1/openapi.json, docs at /api/v1/docs.

Every read goes through the scoped selectors of `rentals.selectors` (a member gets 404 for another
customer's rental), every write through `rentals.services`. Errors use the upstream's envelope (`api.errors`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

import pydantic
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from ninja import Header, NinjaAPI, Query

from accounts.models import Customer, UpstreamCredential, customer_ref_validator
from accounts.roles import is_operator
from accounts.validators import validate_ssh_public_key
from api import idempotency
from api.auth import AUTH, require_scope, require_writer
from api.errors import ApiError, error_response, install_handlers, validation_error_from
from api.representations import dumps, fabric_dict, node_dict, rental_dict
from api.schemas import ErrorOut, FabricListOut, FabricNodesOut, RentalCreateIn, RentalListOut, RentalOut
from rentals import offers, selectors, services
from rentals.audit import support_reads
from rentals.models import Rental
from rentals.offers import Fabric, OfferListing
from rentals.states import RentalStatus
from rentals.upstream import RateLimited, UpstreamError, UpstreamUnavailable

logger = logging.getLogger(__name__)

api = NinjaAPI(
    title="Lium cluster rentals dashboard API",
    version="1",
    description=(
        "Rent multi-node GPU clusters through the dashboard. Authenticate with a key from /profile/api-keys/ "
        "sent as `X-API-Key` or `Authorization: Bearer`. Scopes: `read` (GETs), `rent` (create rentals), "
        "`manage` (terminate). `POST /rentals` honours `Idempotency-Key` like the Lium API: the same key and "
        "identical body within 24 h replays the first answer with `Idempotent-Replayed: true`. Errors use "
        'the envelope `{"success": false, "error": {"code", "message", "hint", "request_id"}, '
        '"message", "status_code"}`.'
    ),
    urls_namespace="api-v1",
    auth=AUTH,
    openapi_url="/openapi.json",
    docs_url="/docs",
)
install_handlers(api)
api.add_router("/webhooks", "api.webhooks.router")  # webhook endpoints (notifications app)
api.add_router("/usage", "api.usage.router")  # cost per rental in a month (billing app)

# Documented error answers (all use the envelope); any other status the API may give uses it too.
ERRORS: dict[Any, Any] = {frozenset({400, 401, 403, 404, 409, 422, 429, 502, 503}): ErrorOut}
StatusFilter = Literal[tuple(RentalStatus.values)]  # type: ignore[valid-type]


def json_response(data: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(dumps(data), status=status, content_type="application/json")


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


# --- Fabrics -----------------------------------------------------------------------------------------------


def _listing_for(credential: UpstreamCredential | None) -> OfferListing:
    if credential is None or not credential.active:
        raise ApiError(
            409,
            "no_credential",
            "You are not a member of any customer with an active Lium credential.",
            hint="Ask an operator to add you to a customer and give it a credential.",
        )
    try:
        return offers.offers_get(credential=credential)
    except RateLimited as exc:
        retry = str(max(1, int(exc.retry_after or 5)))
        raise ApiError(
            503,
            "upstream_rate_limited",
            "The Lium API asked us to slow down.",
            hint="Try again shortly.",
            headers={"Retry-After": retry},
        ) from exc
    except UpstreamUnavailable as exc:
        raise ApiError(
            503,
            "upstream_unavailable",
            f"The Lium API cannot be reached right now ({exc.message}).",
            hint="Try again in a moment.",
            headers={"Retry-After": "5"},
        ) from exc
    except (UpstreamError, ValueError) as exc:
        raise ApiError(
            502,
            "upstream_error",
            f"The Lium API refused to list the fabrics ({exc}).",
            hint="Give support the request_id if this persists.",
        ) from exc


def _default_credential(request: HttpRequest) -> UpstreamCredential | None:
    """The credential whose offers this user sees: their first customer's (as the web pages do)."""
    customer = selectors.customer_list_for_user(user=request.user).select_related("default_credential").first()
    return customer.default_credential if customer else None


@api.get("/fabrics", response={200: FabricListOut, **ERRORS}, tags=["fabrics"], summary="List fabric offers")
def fabric_list(request: HttpRequest) -> HttpResponse:
    """Fabrics with free nodes, from a briefly cached upstream listing."""
    require_scope(request, "read")
    listing = _listing_for(_default_credential(request))
    return json_response(
        {"fabrics": [fabric_dict(fabric) for fabric in listing.fabrics], "age_seconds": listing.age_seconds}
    )


@api.get(
    "/fabrics/nodes", response={200: FabricNodesOut, **ERRORS}, tags=["fabrics"], summary="List a fabric's free nodes"
)
def fabric_nodes(
    request: HttpRequest, fabric_id: str = Query(..., min_length=1, max_length=300, description="The fabric's id.")
) -> HttpResponse:
    """A fabric's free nodes (the fabric id is a query parameter: ids contain ':', '/' and spaces)."""
    require_scope(request, "read")
    listing = _listing_for(_default_credential(request))
    fabric = listing.fabric(fabric_id)
    if fabric is None:
        raise ApiError(404, "fabric_not_found", "No such fabric is offered now.", hint="List fabrics again.")
    return json_response(
        {
            "fabric": fabric_dict(fabric),
            "nodes": [node_dict(node) for node in fabric.nodes],
            "age_seconds": listing.age_seconds,
        }
    )


# --- Rentals: reads ----------------------------------------------------------------------------------------


def _aware(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise ApiError(422, "validation_error", f"{name}: the date is out of range.") from exc


def _encode_cursor(rental: Rental) -> str:
    raw = json.dumps([rental.created_at.isoformat(), rental.pk]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, pk = json.loads(raw)
        at = datetime.fromisoformat(created)
        if at.tzinfo is None or not isinstance(pk, int) or isinstance(pk, bool) or not 0 < pk < 2**62:
            raise ValueError
        return at.astimezone(UTC), pk
    except (ValueError, TypeError, OverflowError, RecursionError, binascii.Error, UnicodeDecodeError) as exc:
        raise ApiError(
            422, "invalid_cursor", "The cursor is not valid.", hint="Use next_cursor from the previous page as is."
        ) from exc


def _with_details(rentals: Any) -> Any:
    return rentals.prefetch_related("attempts", "members")


@api.get("/rentals", response={200: RentalListOut, **ERRORS}, tags=["rentals"], summary="List rentals")
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
    after = _aware(created_after, "created_after")
    before = _aware(created_before, "created_before")
    if after is not None:
        rentals = rentals.filter(created_at__gte=after)
    if before is not None:
        rentals = rentals.filter(created_at__lt=before)
    rentals = rentals.order_by("-created_at", "-id")
    if cursor:
        at, pk = _decode_cursor(cursor)
        rentals = rentals.filter(created_at__lte=at).exclude(created_at=at, id__gte=pk)
    page = list(_with_details(rentals)[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    support_reads(user=request.user, rentals=page)
    return json_response(
        {"items": [rental_dict(rental) for rental in page], "next_cursor": _encode_cursor(page[-1]) if more else None}
    )


def _rental_for(request: HttpRequest, rental_id: str) -> Rental:
    """Return a rental the user may see, or a 404 envelope (which never says whether it exists)."""
    try:
        public_id = uuid.UUID(rental_id)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ApiError(404, "not_found", "No such rental.") from exc
    try:
        rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    except Http404 as exc:
        raise ApiError(404, "not_found", "No such rental.") from exc
    return _with_details(Rental.objects.select_related("customer")).get(pk=rental.pk)


@api.get("/rentals/{rental_id}", response={200: RentalOut, **ERRORS}, tags=["rentals"], summary="Get a rental")
def rental_get(request: HttpRequest, rental_id: str) -> HttpResponse:
    """One rental with its attempts and members."""
    require_scope(request, "read")
    rental = _rental_for(request, rental_id)
    support_reads(user=request.user, rentals=[rental])
    return json_response(rental_dict(rental))


# --- Rentals: writes ---------------------------------------------------------------------------------------


@api.post(
    "/rentals/{rental_id}/terminate",
    response={202: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Terminate a rental's cluster",
)
def rental_terminate(request: HttpRequest, rental_id: str) -> HttpResponse:
    """Start removing the cluster; the rental moves to `terminating`, then `terminated`."""
    require_scope(request, "manage")
    require_writer(request)
    rental = _rental_for(request, rental_id)
    if not is_operator(request.user) and not rental.customer.memberships.filter(user_id=_user(request).pk).exists():
        raise ApiError(403, "forbidden", "You may not change this rental.")
    if rental.status == RentalStatus.TERMINATING:
        return json_response(rental_dict(rental), status=202)
    try:
        moved = services.rental_terminate(rental=rental, actor=_user(request), reason="Requested through the API.")
    except DjangoValidationError as exc:
        raise ApiError(409, "cluster_not_known_yet", exc.messages[0], hint="Try again in a minute.") from exc
    if not moved:
        raise ApiError(
            409,
            "not_terminable",
            f"A rental in state '{rental.status}' has no cluster to remove.",
            hint="Only rented, ready or degraded rentals can be terminated.",
        )
    return json_response(rental_dict(_rental_for(request, rental_id)), status=202)


def _parse_order_body(raw: bytes) -> RentalCreateIn:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(400, "invalid_json", "The request body is not valid JSON.", hint="Send a JSON object.") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "The request body must be a JSON object.", hint="Send a JSON object.")
    try:
        return RentalCreateIn.model_validate(data)
    except pydantic.ValidationError as exc:
        raise validation_error_from(exc.errors(include_url=False)) from exc


def _field_error(field: str, code: str, message: str, status: int = 422) -> ApiError:
    return ApiError(
        status,
        code,
        f"{field}: {message}",
        hint="Fix this field and send the request again.",
        validation_errors=[{"field": field, "message": message}],
    )


def _resolve_customer(request: HttpRequest, wanted: int | str | None) -> Customer:
    customers = selectors.customer_list_for_renting(user=request.user).select_related("default_credential")
    if wanted is None:
        mine = list(customers[:2])
        if len(mine) != 1:
            raise _field_error(
                "customer", "customer_required", "Say which customer this rental is for (its id or name)."
            )
        return mine[0]
    found = None
    if isinstance(wanted, int):
        found = customers.filter(pk=wanted).first()
    elif "\x00" not in wanted:
        found = customers.filter(name=wanted).first()
        if found is None and wanted.isascii() and wanted.isdigit() and len(wanted) < 10:
            found = customers.filter(pk=int(wanted)).first()
    if found is None:
        raise _field_error("customer", "unknown_customer", f"You may not rent for a customer '{wanted}'.")
    return found


def _check_nodes(chosen: list[str], fabric: Fabric, listing: OfferListing) -> None:
    """Apply the rent form's node checks (one shared function) and answer in the API's envelope."""
    try:
        offers.check_node_selection(chosen=chosen, fabric=fabric, listing=listing)
    except DjangoValidationError as exc:
        raise _field_error("executor_ids", exc.code or "invalid_nodes", exc.messages[0]) from exc


def _build_order(request: HttpRequest, data: RentalCreateIn) -> tuple[Customer, services.RentOrder, str | None]:
    """Validate the order against the customer, the fabric's free nodes and the templates; raise ApiError."""
    if data.customer_ref not in (None, "") and not is_operator(request.user):
        raise ApiError(
            403,
            "customer_ref_not_allowed",
            "Only operators may set customer_ref; leave it out to use your customer's ref.",
            hint="Remove customer_ref from the request.",
        )
    customer = _resolve_customer(request, data.customer)
    if data.customer_ref:
        try:
            customer_ref_validator(data.customer_ref)
        except DjangoValidationError as exc:
            raise _field_error("customer_ref", "invalid_customer_ref", exc.messages[0]) from exc
    if (data.executor_ids is None) == (data.node_count is None):
        raise _field_error("executor_ids", "nodes_required", "Give either executor_ids or node_count (not both).")
    try:
        keys = [validate_ssh_public_key(key) for key in data.ssh_public_keys]
    except DjangoValidationError as exc:
        raise _field_error("ssh_public_keys", "invalid_ssh_key", exc.messages[0]) from exc
    try:
        from rentals.validators import validate_pod_name

        validate_pod_name(data.pod_name)
    except DjangoValidationError as exc:
        raise _field_error("pod_name", "invalid_pod_name", exc.messages[0]) from exc
    credential = customer.default_credential
    if credential is None or not credential.active:
        raise ApiError(
            422,
            "no_credential",
            f"Customer {customer.name} has no active Lium credential.",
            hint="Ask an operator to set one.",
        )
    listing = _listing_for(credential)
    fabric = listing.fabric(data.fabric_id)
    if fabric is None:
        raise _field_error("fabric_id", "fabric_not_offered", "This fabric is not offered now; list fabrics again.")
    if data.node_count is not None:
        chosen = [node.id for node in fabric.cheapest(data.node_count)]
        if len(chosen) < data.node_count:
            raise _field_error(
                "node_count", "not_enough_nodes", f"This fabric has only {len(chosen)} whole free node(s)."
            )
    else:
        chosen = list(data.executor_ids or [])
    _check_nodes(chosen, fabric, listing)
    try:
        templates = offers.cluster_templates(credential=credential)
    except UpstreamError as exc:
        raise ApiError(
            503, "upstream_unavailable", f"The Lium API could not list templates ({exc}).", hint="Try again."
        ) from exc
    template_id = data.template_id
    if template_id:
        if template_id not in {template.id for template in templates}:
            raise _field_error(
                "template_id", "unknown_template", "Not a cluster template; leave it out for the newest."
            )
    elif templates:
        template_id = templates[0].id
    nodes = {node.id: node for node in fabric.nodes}
    picked = [nodes[node_id] for node_id in chosen]
    order = services.RentOrder(
        fabric_id=fabric.fabric_id,
        executor_ids=chosen,
        pod_name=data.pod_name,
        public_keys=keys,
        template_id=template_id or None,
        initial_port_count=data.initial_port_count,
        termination_hours=data.termination_hours,
        enable_jupyter=data.enable_jupyter,
        enable_volume_encryption=data.enable_volume_encryption,
        enable_backups=data.enable_backups,
        gpu_type=picked[0].machine_name,
        gpus_per_node=picked[0].gpu_count,
        price_per_hour=sum((node.price_per_hour for node in picked), Decimal(0)),
    )
    return customer, order, data.customer_ref or customer.customer_ref or None


RENTAL_CREATE_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": RentalCreateIn.model_json_schema()}},
    }
}


@api.post(
    "/rentals",
    response={201: RentalOut, **ERRORS},
    tags=["rentals"],
    summary="Rent a cluster",
    openapi_extra=RENTAL_CREATE_BODY,
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
    require_scope(request, "rent")
    require_writer(request)
    raw = request.body
    record = None
    if idempotency_key is not None:
        idempotency.validate_key(idempotency_key)
        claim = idempotency.idempotency_begin(
            user=_user(request), key=idempotency_key, body_sha256=hashlib.sha256(raw).hexdigest()
        )
        if isinstance(claim, idempotency.Replay):
            response = HttpResponse(claim.body, status=claim.status, content_type="application/json")
            response["Idempotent-Replayed"] = "true"
            return response
        record = claim
    try:
        customer, order, customer_ref = _build_order(request, _parse_order_body(raw))
        with transaction.atomic():
            try:
                rental = services.rental_submit(
                    user=_user(request), customer=customer, order=order, customer_ref=customer_ref
                )
            except DjangoValidationError as exc:
                raise ApiError(
                    422, exc.code or "order_refused", " ".join(exc.messages), hint="Change the order and try again."
                ) from exc
            rental = _with_details(Rental.objects.select_related("customer")).get(pk=rental.pk)
            body = dumps(rental_dict(rental))
            if record is not None:
                idempotency.idempotency_finish(record=record, status=201, body=body)
    except idempotency.LostIdempotencyLock:
        return _lost_lock_response(request)
    except ApiError as error:
        response = error_response(request, error)
        if record is not None:
            if error.status < 500:
                # A refusal is the answer to this request, stored like the upstream stores it.
                try:
                    idempotency.idempotency_finish(record=record, status=error.status, body=response.content.decode())
                except idempotency.LostIdempotencyLock:
                    return _lost_lock_response(request)
            else:
                idempotency.idempotency_abandon(record=record)
        return response
    except BaseException:
        if record is not None:
            idempotency.idempotency_abandon(record=record)
        raise
    offers.offers_take(credential=rental.credential, node_ids=rental.executor_ids)
    return HttpResponse(body, status=201, content_type="application/json")


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
