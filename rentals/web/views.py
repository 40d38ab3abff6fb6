"""Customer pages: fabrics, the node picker and rent form, my rentals, a rental's live progress."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts.mfa_required import enrolment_redirect
from accounts.models import Customer, SshPublicKey
from accounts.roles import is_operator, is_staff_reader
from accounts.users import request_user
from common import ratelimit
from common.metrics import POLL_REQUESTS
from rentals import lium_switch, offers, selectors, services
from rentals.audit import support_reads
from rentals.cursors import InvalidCursor, rentals_older_than, rentals_page
from rentals.models import Rental
from rentals.offers import OfferListing
from rentals.orders.service import OrderOffer, OrderRefused, order_check, order_offer, order_save
from rentals.states import RentalStatus
from rentals.upstream import UpstreamError
from rentals.upstream.parse_offers import Fabric
from rentals.web import progress
from rentals.web.forms import RentForm
from rentals.web.lifecycle import _may_act, rental_to_change
from rentals.web.prefill import rent_prefill_initial
from rentals.web.summary import rent_summary_build


def _listing_or_error(
    request: HttpRequest, *, customer: Customer | None, refresh: bool = False
) -> tuple[OfferListing | None, str]:
    """Return the offers of the customer's Lium account, or why they cannot be shown."""
    credential = selectors.customer_credential(customer)
    if customer is None:
        return None, "You are not a member of any customer with a Lium credential; ask an operator to add you."
    if credential is None:
        return None, f"{customer.name} has no active Lium credential; ask an operator to set one."
    try:
        return offers.offers_get(credential=credential, refresh=refresh), ""
    except (UpstreamError, ValueError) as exc:
        return None, f"The Lium API could not list the fabrics right now ({exc}). Try again in a moment."


@login_required
def fabric_list(request: HttpRequest) -> HttpResponse:
    """List every fabric with its free nodes and cheapest node-hour, as the chosen customer's account offers them."""
    customers = list(selectors.customer_list_for_user(user=request.user))
    filters = _fabric_filters(request)
    context: dict[str, object] = {"customers": customers, "fabrics": [], "filters": filters}
    try:
        customer = selectors.customer_for_browsing(user=request.user, wanted=_customer_id(request))
    except Customer.DoesNotExist:
        error = "You do not act for that customer: pick one of yours."
        return render(request, "rentals/fabric_list.html", {**context, "error": error}, status=404)
    listing, error = _listing_or_error(request, customer=customer, refresh=request.GET.get("refresh") == "1")
    fabrics = listing.fabrics if listing else []
    gpu_types = sorted({fabric.gpu_type for fabric in fabrics if fabric.gpu_type})
    context |= {
        "customer": customer,
        "fabrics": _fabrics_filtered(fabrics, filters),
        "listing": listing,
        "error": error,
        "gpu_types": gpu_types,
        "may_rent": selectors.customer_list_for_renting(user=request.user).exists(),
        "renting_off_since": lium_switch.cluster_renting_off_since(credential=selectors.customer_credential(customer)),
    }
    return render(request, "rentals/fabric_list.html", context)


def _fabric_filters(request: HttpRequest) -> dict[str, Any]:
    """Read the fabrics page's filters; a bad value means no filter."""
    try:
        min_free = max(0, int(request.GET.get("min_free", "0") or 0))
    except ValueError:
        min_free = 0
    kind = request.GET.get("type", "")
    return {
        "gpu": request.GET.get("gpu", ""),
        "type": kind if kind in ("infiniband", "roce") else "",
        "min_free": min_free,
        "sort": request.GET.get("sort", "price"),
    }


def _fabrics_filtered(fabrics: list[Fabric], filters: dict[str, Any]) -> list[Fabric]:
    """Return the fabrics that pass the filters, in the chosen order."""
    shown = [
        fabric
        for fabric in fabrics
        if (not filters["gpu"] or fabric.gpu_type == filters["gpu"])
        and (not filters["type"] or fabric.fabric_type == filters["type"])
        and fabric.free_count >= filters["min_free"]
    ]
    if filters["sort"] == "free":
        return sorted(shown, key=lambda fabric: -fabric.free_count)
    return sorted(shown, key=lambda fabric: (fabric.cheapest_node_hour is None, fabric.cheapest_node_hour or 0))


@login_required
@require_http_methods(["GET", "POST"])
def rent(request: HttpRequest) -> HttpResponse:
    """Pick nodes of one fabric and submit the order; on success go to the rental's page."""
    # Read once, with each default credential: the rental uses the chosen customer's.
    customers = list(selectors.customer_list_for_renting(user=request.user).select_related("default_credential"))
    if not customers:
        if request.method == "POST":
            raise PermissionDenied("Support can look but not rent: renting needs a customer or the operator role.")
        messages.error(request, "You can browse fabrics, but renting needs a customer membership or the operator role.")
        return redirect("rentals:fabric_list")
    if request.method == "POST":
        # A second click on Submit: its form token created a rental already (its nodes are no longer free),
        # so show that rental instead of errors that would only confuse.
        already = selectors.rental_for_submit_token(user=request.user, token=request.POST.get("submit_token", ""))
        if already is not None:
            return redirect("rentals:rental_detail", public_id=already.public_id)
    params = request.POST if request.method == "POST" else request.GET
    chosen = _chosen_customer(customers, params.get("customer"))
    fabric_id = request.GET.get("fabric") or request.POST.get("fabric", "")
    try:
        # Offers, node checks, prices and the quotas all use the chosen customer's credential, the one the
        # order is sent with (customers may rent on different Lium accounts).
        offer = order_offer(user=request.user, customer=chosen.pk, fabric_id=fabric_id)
    except (OrderRefused, UpstreamError) as exc:
        return _back_to_fabrics(request, chosen, exc)
    form_kwargs: dict[str, Any] = {
        "fabric": offer.fabric,
        "templates": offer.templates,
        # Only the chosen customer: the nodes shown are its account's, so the order must be its too.
        "customers": [chosen],
        "may_set_customer_ref": is_operator(request.user),
        "saved_keys": list(SshPublicKey.objects.filter(user_id=request.user.pk or 0)),
    }
    note = ""
    if request.method == "POST":
        form = RentForm(request.POST, **form_kwargs)
        if form.is_valid() and (rental := _rent_submit(request, form, offer)) is not None:
            return redirect("rentals:rental_detail", public_id=rental.public_id)
    else:
        prefilled = rent_prefill_initial(request, offer.fabric)
        form = RentForm(initial={**_cheapest_initial(request, offer.fabric), **prefilled}, **form_kwargs)
        note = prefilled.get("note", "")
    context = {"form": form, "fabric": offer.fabric, "listing": offer.listing, "customers": customers}
    context["prefill_note"] = note
    context["renting_off_since"] = lium_switch.cluster_renting_off_since(credential=offer.credential)
    summary = rent_summary_build(
        offer.fabric, form, credential=offer.credential, template_id=form["template_id"].value()
    )
    return render(request, "rentals/rent.html", {**context, "chosen_customer": chosen, **summary})


def _back_to_fabrics(request: HttpRequest, chosen: Customer, exc: Exception) -> HttpResponse:
    """Go back to the fabrics of the chosen customer, saying why the rent form cannot be shown."""
    if isinstance(exc, UpstreamError):  # the offers or the templates (which the fabrics page does not read)
        messages.error(request, f"The Lium API could not list the fabrics and templates right now ({exc}).")
    elif isinstance(exc, OrderRefused) and exc.code == "fabric_not_offered":
        messages.error(request, f"That fabric is not offered to {chosen.name} any more; pick another one.")
    # Without a credential the fabrics page says itself why (said once).
    return redirect(f"{reverse('rentals:fabric_list')}?customer={chosen.pk}")


def _rent_submit(request: HttpRequest, form: RentForm, offer: OrderOffer) -> Rental | None:
    """Submit a valid rent form through the order service: the rental, or None with the refusal on the form."""
    try:
        checked = order_check(user=request_user(request), choice=form.choice(), offer=offer)
        wait = ratelimit.hit(scope="rent-submit", key=str(request.user.pk), limit=settings.RENT_SUBMIT_RATE_PER_MINUTE)
        if wait is not None:
            form.add_error(None, f"Too many orders in a minute; wait {wait} s and submit again.")
            return None
        # A second click that still validates meets its first rental through the form token's unique
        # constraint, and is answered with that rental.
        rental = order_save(user=request_user(request), checked=checked, submit_token=form.cleaned_data["submit_token"])
    except OrderRefused as refused:
        form.add_error(refused.field if refused.field in form.fields else None, refused.message)
        return None
    if rental.start_at is None:  # a scheduled rental's nodes stay free for others until its time
        offers.offers_take(credential=rental.credential, node_ids=rental.executor_ids)
    return rental


def _cheapest_initial(request: HttpRequest, fabric: Fabric) -> dict[str, object]:
    """Preselect the `cheapest=N` cheapest nodes the fabrics page linked to."""
    count = request.GET.get("cheapest", "")
    if not (count.isascii() and count.isdigit()):
        return {}
    # A longer number than any fabric's node count means "all"; int() refuses over 4300 digits.
    wanted = int(count) if len(count) <= 6 else len(fabric.nodes)
    return {"executor_ids": [node.id for node in fabric.cheapest(wanted)]}


def _customer_id(request: HttpRequest) -> int | str | None:
    """Return the `customer` parameter of the page's selector: an id (a customer named "7" must not hide id 7)."""
    wanted = request.GET.get("customer")
    return int(wanted) if wanted and wanted.isascii() and wanted.isdigit() and len(wanted) < 10 else wanted


def _chosen_customer(customers: list[Any], wanted: object) -> Any:
    """Return the customer named by the `customer` parameter (a pk) if the user may rent for it, else the first."""
    return next((customer for customer in customers if str(customer.pk) == str(wanted or "")), customers[0])


@login_required
def rent_summary(request: HttpRequest) -> HttpResponse:
    """The live order summary (htmx): recomputed whenever the node selection changes."""
    # Priced with the offers of the customer the form rents for (its account may differ from the first's).
    customers = list(selectors.customer_list_for_renting(user=request.user).select_related("default_credential"))
    customer = _chosen_customer(customers, request.GET.get("customer")) if customers else None
    listing, error = _listing_or_error(request, customer=customer)
    fabric = listing.fabric(request.GET.get("fabric", "")) if listing else None
    if listing is None or fabric is None:
        # Answer 200 so htmx swaps the message in (it ignores 4xx), and the next change can recover.
        error = error or "That fabric is not offered any more; go back to the fabrics."
        return render(request, "rentals/rent.html#summary", {"summary": None, "error": error})
    form = RentForm(
        request.GET,
        fabric=fabric,
        templates=[],
        customers=[],
        may_set_customer_ref=False,
    )
    credential = selectors.customer_credential(customer)
    summary = rent_summary_build(fabric, form, credential=credential, template_id=request.GET.get("template_id"))
    return render(request, "rentals/rent.html#summary", {"fabric": fabric, **summary})


RENTALS_PER_PAGE = 25


@login_required
def rental_list(request: HttpRequest) -> HttpResponse:
    """List the rentals this user may see, newest first, with filters."""
    rentals = selectors.rental_list_for_user(user=request.user)
    status = request.GET.get("status", "")
    if status in RentalStatus.values:
        rentals = rentals.filter(status=status)
    ref = request.GET.get("ref", "").strip()
    if "\x00" in ref:
        rentals = rentals.none()  # no ref holds a NUL, and PostgreSQL refuses one in a query
    elif ref:
        rentals = rentals.filter(customer_ref=ref)
    # The list never shows the stored request bytes or long error texts: do not load them.
    rentals = rentals.defer("request_body", "error_message", "error_hint").order_by("-created_at", "-id")
    # Keyset pagination: "older than this row" reads the (customer, created) index, however deep the page.
    before = request.GET.get("before", "")
    try:
        rentals = rentals_older_than(rentals, before) if before else rentals
    except InvalidCursor:
        before = ""  # a garbled cursor means the first page
    page, older = rentals_page(rentals, limit=RENTALS_PER_PAGE)
    support_reads(user=request.user, rentals=page, where="rental list")
    query = request.GET.copy()
    query["fragment"] = "rows"
    context: dict[str, object] = {
        "page": page,
        "older": older,
        "is_first_page": not before,
        "statuses": RentalStatus.choices,
        "filters": {"status": status, "ref": ref},
        # In-flight rows refresh themselves (one request for the visible page) until none is in flight.
        "any_in_flight": any(rental.is_in_flight for rental in page),
        "rows_query": query.urlencode(),
    }
    if request.GET.get("fragment") == "rows":
        return render(request, "rentals/rental_list.html#rows", context)
    # Each of the member's customers shows what is left of its quotas (billing's `quota_left` tag); staff none.
    staff = is_staff_reader(request.user)
    context["quota_customers"] = [] if staff else list(selectors.customer_list_for_user(user=request.user))
    return render(request, "rentals/rental_list.html", context)


@login_required
def rental_detail(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Show one rental with its live progress, attempts and members."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    support_reads(user=request.user, rentals=[rental])
    poll_url = reverse("rentals:rental_progress", kwargs={"public_id": rental.public_id})
    context = progress.progress_context(request, rental, may_act=_may_act(request), poll_url=poll_url)
    return render(request, "rentals/rental_detail.html", context)


def rental_progress(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Answer the rental page's poll: 204 when the page shows what is current, else a new poller and the section.

    A valid poll token stands in for the full check (`progress.poll_granted`); without one, the full check.
    """
    granted = progress.poll_granted(request, public_id)
    if granted is None:
        return _rental_progress_checked(request, public_id)
    rental, may_act = granted
    answer = progress.poll_answer(request, rental, may_act=may_act, token=request.GET["t"])
    POLL_REQUESTS.labels(outcome="unchanged" if answer.status_code == 204 else "changed").inc()
    return answer


@login_required
def _rental_progress_checked(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    POLL_REQUESTS.labels(outcome="checked").inc()
    if (enrol_first := enrolment_redirect(request)) is not None:  # the middleware lets polls pass for their token
        return enrol_first
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    support_reads(user=request.user, rentals=[rental])
    return progress.poll_answer(request, rental, may_act=_may_act(request))


@login_required
@require_http_methods(["GET", "POST"])
def rental_terminate(request: HttpRequest, public_id: str) -> HttpResponse:
    """Confirm (GET), then remove (POST) the rental's cluster: the customer's own, or any for operators."""
    rental = rental_to_change(request, public_id)
    if request.method == "GET":
        return render(request, "rentals/terminate_confirm.html", {"rental": rental})
    try:
        if services.rental_terminate(rental=rental, actor=request_user(request), reason=_reason(request)):
            messages.success(request, "Removing the cluster.")
        else:
            messages.error(request, "This rental has no cluster to remove.")
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    return redirect("rentals:rental_detail", public_id=rental.public_id)


@login_required
@require_POST
def rental_cancel(request: HttpRequest, public_id: str) -> HttpResponse:
    """Cancel a rental that has not been sent yet."""
    rental = rental_to_change(request, public_id)
    if services.rental_cancel(rental=rental, actor=request_user(request), reason=_reason(request)):
        messages.success(request, "Cancelled. Nothing was rented.")
    else:
        messages.error(request, "Too late to cancel: the order has already been sent.")
    return redirect("rentals:rental_detail", public_id=rental.public_id)


REASON_MAX_LENGTH = 1000


def _reason(request: HttpRequest) -> str:
    """Return the posted reason fit for the timeline: no NUL (PostgreSQL refuses it), at most 1000 characters."""
    return str(request.POST.get("reason", "")).replace("\x00", "")[:REASON_MAX_LENGTH]
