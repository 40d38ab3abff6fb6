"""Fabric offers in the JSON API (a django-ninja Router, added to api.v1 at the root): list fabrics, a fabric's nodes.

Each customer rents on its own Lium account: the offers are those of the customer the caller acts for (`customer`,
an id or a name as `POST /rentals` takes it; by default the caller's first), read with its credential.
Also `listing_for`, the upstream listing read for the API's callers (the order endpoint reads it too), with
upstream failures answered in the error envelope.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router

from accounts.models import Customer, UpstreamCredential
from api.auth import require_scope
from api.errors import ApiError
from api.representations import fabric_dict, json_response, node_dict
from api.schemas import ERRORS, FabricListOut, FabricNodesOut
from rentals import lium_switch, offers, selectors
from rentals.estimates import estimates_read, template_id_resolve
from rentals.offers import OfferListing
from rentals.upstream import RateLimited, UpstreamError, UpstreamUnavailable

router = Router()


def listing_for(credential: UpstreamCredential | None) -> OfferListing:
    """Return the credential's fabric offers (`selectors.customer_credential`: None when the customer has no
    active one); raise the envelope's 409, 502 or 503 when they cannot be read."""
    if credential is None:
        raise ApiError(
            409,
            "no_credential",
            "You are not a member of any customer with an active Lium credential.",
            hint="Ask an operator to add you to a customer and give it a credential.",
        )
    try:
        return offers.offers_get(credential=credential)
    except (UpstreamError, ValueError) as exc:
        raise upstream_refusal(exc) from exc


def upstream_refusal(exc: Exception) -> ApiError:
    """Return the envelope's answer to offers that cannot be read: 503 to try again soon, else 502."""
    if isinstance(exc, RateLimited):
        retry = str(max(1, int(exc.retry_after or 5)))
        return ApiError(
            503,
            "upstream_rate_limited",
            "The Lium API asked us to slow down.",
            hint="Try again shortly.",
            headers={"Retry-After": retry},
        )
    if isinstance(exc, UpstreamUnavailable):
        return ApiError(
            503,
            "upstream_unavailable",
            f"The Lium API cannot be reached right now ({exc.message}).",
            hint="Try again in a moment.",
            headers={"Retry-After": "5"},
        )
    return ApiError(
        502,
        "upstream_error",
        f"The Lium API refused to list the fabrics ({exc}).",
        hint="Give support the request_id if this persists.",
    )


CUSTOMER_QUERY = Query(
    None,
    max_length=200,
    description="The customer you act for (its id or name): its Lium account's offers. Default: your first.",
)


def _browsed(request: HttpRequest, wanted: str | None) -> tuple[Customer, OfferListing]:
    """Return the customer the caller acts for and its offers; raise 404 for a customer not theirs."""
    try:
        customer = selectors.customer_for_browsing(user=request.user, wanted=wanted)
    except Customer.DoesNotExist as exc:
        raise ApiError(
            404,
            "unknown_customer",
            f"You do not act for a customer '{wanted}'.",
            hint="Give the id or name of one of your customers, or leave customer out.",
        ) from exc
    listing = listing_for(selectors.customer_credential(customer))
    assert customer is not None  # without a customer there is no credential: listing_for refused
    return customer, listing


def _customer_dict(customer: Customer) -> dict[str, object]:
    return {"id": customer.pk, "name": customer.name}


# Operation ids name the module the routes were first written in (`api.v1`): clients generated from the
# schema keep their method names.
@router.get(
    "/fabrics",
    response={200: FabricListOut, **ERRORS},
    tags=["fabrics"],
    summary="List fabric offers",
    operation_id="api_v1_fabric_list",
)
def fabric_list(request: HttpRequest, customer: str | None = CUSTOMER_QUERY) -> HttpResponse:
    """Fabrics with free nodes, from a briefly cached upstream listing of the customer's Lium account."""
    require_scope(request, "read")
    chosen, listing = _browsed(request, customer)
    return json_response(
        {
            "customer": _customer_dict(chosen),
            "fabrics": [fabric_dict(fabric) for fabric in listing.fabrics],
            "age_seconds": listing.age_seconds,
            "cluster_renting_off_since": lium_switch.cluster_renting_off_since(
                credential=selectors.customer_credential(chosen)
            ),
        }
    )


@router.get(
    "/fabrics/nodes",
    response={200: FabricNodesOut, **ERRORS},
    tags=["fabrics"],
    summary="List a fabric's free nodes",
    operation_id="api_v1_fabric_nodes",
)
def fabric_nodes(
    request: HttpRequest,
    fabric_id: str = Query(..., min_length=1, max_length=300, description="The fabric's id."),
    customer: str | None = CUSTOMER_QUERY,
) -> HttpResponse:
    """A fabric's free nodes (the fabric id is a query parameter: ids contain ':', '/' and spaces)."""
    require_scope(request, "read")
    chosen, listing = _browsed(request, customer)
    fabric = listing.fabric(fabric_id)
    if fabric is None:
        raise ApiError(404, "fabric_not_found", "No such fabric is offered now.", hint="List fabrics again.")
    # For the template an order without one gets (the newest cluster template); unknown ones are null.
    credential = selectors.customer_credential(chosen)
    found = estimates_read(
        credential=credential,
        template_id=template_id_resolve(credential=credential),
        executor_ids=[node.id for node in fabric.nodes],
    )
    return json_response(
        {
            "customer": _customer_dict(chosen),
            "fabric": fabric_dict(fabric),
            "nodes": [node_dict(node, found.get(node.id)) for node in fabric.nodes],
            "age_seconds": listing.age_seconds,
        }
    )
