"""Customer pages: fabrics, the node picker and rent form, my rentals, a rental's live progress."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import SshPublicKey
from accounts.roles import is_operator, is_staff_reader
from common import ratelimit
from rentals import offers, progress, selectors, services
from rentals.audit import support_reads
from rentals.forms import RentForm
from rentals.models import Rental
from rentals.offers import Fabric, OfferListing
from rentals.states import RentalStatus as S
from rentals.upstream import UpstreamError


def _credential_for(request: HttpRequest):  # type: ignore[no-untyped-def]
    """Return the credential whose offers this user sees: their first customer's default credential."""
    customer = selectors.customer_list_for_user(user=request.user).select_related("default_credential").first()
    return customer.default_credential if customer else None


def _listing_or_error(
    request: HttpRequest, *, refresh: bool = False, credential: Any = None
) -> tuple[OfferListing | None, str]:
    credential = credential or _credential_for(request)
    if credential is None:
        return None, "You are not a member of any customer with a Lium credential; ask an operator to add you."
    try:
        return offers.offers_get(credential=credential, refresh=refresh), ""
    except (UpstreamError, ValueError) as exc:
        return None, f"The Lium API could not list the fabrics right now ({exc}). Try again in a moment."


@login_required
def fabric_list(request: HttpRequest) -> HttpResponse:
    """List every fabric with its free nodes and cheapest node-hour."""
    listing, error = _listing_or_error(request, refresh=request.GET.get("refresh") == "1")
    fabrics = listing.fabrics if listing else []
    gpu = request.GET.get("gpu", "")
    kind = request.GET.get("type", "")
    try:
        min_free = max(0, int(request.GET.get("min_free", "0") or 0))
    except ValueError:
        min_free = 0
    if gpu:
        fabrics = [fabric for fabric in fabrics if fabric.gpu_type == gpu]
    if kind in ("infiniband", "roce"):
        fabrics = [fabric for fabric in fabrics if fabric.fabric_type == kind]
    fabrics = [fabric for fabric in fabrics if fabric.free_count >= min_free]
    sort = request.GET.get("sort", "price")
    if sort == "free":
        fabrics.sort(key=lambda fabric: -fabric.free_count)
    else:
        fabrics.sort(key=lambda fabric: (fabric.cheapest_node_hour is None, fabric.cheapest_node_hour or 0))
    gpu_types = sorted({fabric.gpu_type for fabric in (listing.fabrics if listing else []) if fabric.gpu_type})
    return render(
        request,
        "rentals/fabric_list.html",
        {
            "fabrics": fabrics,
            "listing": listing,
            "error": error,
            "gpu_types": gpu_types,
            "filters": {"gpu": gpu, "type": kind, "min_free": min_free, "sort": sort},
            "may_rent": selectors.customer_list_for_renting(user=request.user).exists(),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def rent(request: HttpRequest) -> HttpResponse:
    """Pick nodes of one fabric and submit the order; on success go to the rental's page."""
    # Read once, with each default credential: the rental uses the chosen customer's.
    customers = list(selectors.customer_list_for_renting(user=request.user).select_related("default_credential"))
    if not customers:
        if request.method == "POST":
            return HttpResponse(
                "Support can look but not rent: renting needs a customer or the operator role.", status=403
            )
        messages.error(request, "You can browse fabrics, but renting needs a customer membership or the operator role.")
        return redirect("fabric_list")
    fabric_id = request.GET.get("fabric") or request.POST.get("fabric", "")
    # Offers, node checks, prices and the spend cap all use the chosen customer's credential, the one the
    # order is sent with (customers may rent on different Lium accounts).
    chosen = _chosen_customer(customers, (request.POST if request.method == "POST" else request.GET).get("customer"))
    credential = chosen.default_credential
    listing, _error = _listing_or_error(request, credential=credential) if credential else (None, "")
    fabric = listing.fabric(fabric_id) if listing else None
    if listing is None or fabric is None or credential is None:
        # When the listing failed, the fabrics page says so itself; say nothing twice.
        if credential is None:
            messages.error(request, f"{chosen.name} has no Lium credential; ask an operator to set one.")
        elif listing is not None:
            messages.error(request, f"That fabric is not offered to {chosen.name} any more; pick another one.")
        return redirect("fabric_list")
    try:
        templates = offers.cluster_templates(credential=credential)
    except UpstreamError as exc:
        messages.error(request, f"The Lium API could not list templates right now ({exc}).")
        return redirect("fabric_list")
    form_kwargs: dict[str, Any] = {
        "fabric": fabric,
        "listing": listing,
        "templates": templates,
        # Only the chosen customer: the nodes shown are its account's, so the order must be its too.
        "customers": [chosen],
        "may_set_customer_ref": is_operator(request.user),
        "saved_keys": SshPublicKey.objects.filter(user_id=request.user.pk or 0),
    }
    if request.method == "POST":
        form = RentForm(request.POST, **form_kwargs)
        if form.is_valid():
            wait = ratelimit.hit(
                scope="rent-submit", key=str(request.user.pk), limit=settings.RENT_SUBMIT_RATE_PER_MINUTE
            )
            if wait is not None:
                form.add_error(None, f"Too many orders in a minute; wait {wait} s and submit again.")
            else:
                customer = form.cleaned_data["customer"]
                override = form.cleaned_data.get("customer_ref") or ""
                try:
                    # A second click that still validates meets its first rental through the form token's
                    # unique constraint, and is answered with that rental.
                    rental = services.rental_submit(
                        user=_user(request),
                        customer=customer,
                        order=form.order(),
                        customer_ref=override or customer.customer_ref or None,
                        submit_token=form.cleaned_data["submit_token"],
                    )
                except ValidationError as exc:
                    form.add_error(None, exc)
                else:
                    offers.offers_take(credential=rental.credential, node_ids=rental.executor_ids)
                    return redirect("rental_detail", public_id=rental.public_id)
        else:
            # A second click on Submit usually fails validation (its nodes are no longer free): if its form
            # token created a rental already, show that rental instead of errors that would only confuse.
            token = request.POST.get("submit_token", "")
            already = selectors.rental_for_submit_token(user=request.user, token=token)
            if already is not None:
                return redirect("rental_detail", public_id=already.public_id)
    else:
        count = request.GET.get("cheapest", "")
        initial: dict[str, object] = {}
        if count.isascii() and count.isdigit():
            # A longer number than any fabric's node count means "all"; int() refuses over 4300 digits.
            wanted = int(count) if len(count) <= 6 else len(fabric.nodes)
            initial["executor_ids"] = [node.id for node in fabric.cheapest(wanted)]
        form = RentForm(initial=initial, **form_kwargs)
    spend = [
        {"customer": customer, "current": selectors.customer_hourly_spend(customer=customer)}
        for customer in customers
        if customer.hourly_spend_cap_usd is not None
    ]
    return render(
        request,
        "rentals/rent.html",
        {
            "form": form,
            "fabric": fabric,
            "listing": listing,
            "spend": spend,
            "customers": customers,
            "chosen_customer": chosen,
            **_summary(fabric, form),
        },
    )


def _chosen_customer(customers: list[Any], wanted: object) -> Any:
    """Return the customer named by the `customer` parameter (a pk) if the user may rent for it, else the first."""
    return next((customer for customer in customers if str(customer.pk) == str(wanted or "")), customers[0])


def _summary(fabric: Fabric, form: RentForm) -> dict[str, object]:
    """Sum up the selected nodes: count, GPUs, price per hour and per day."""
    chosen_ids = set(form["executor_ids"].value() or [])
    chosen = [node for node in fabric.nodes if node.id in chosen_ids]
    per_hour = sum((node.price_per_hour for node in chosen), Decimal(0))
    return {
        "summary": {
            "nodes": len(chosen),
            "gpus": sum(node.gpu_count for node in chosen),
            "per_hour": per_hour,
            "per_day": per_hour * 24,
            "enough": len(chosen) >= 2,
        }
    }


@login_required
def rent_summary(request: HttpRequest) -> HttpResponse:
    """The live order summary (htmx): recomputed whenever the node selection changes."""
    # Priced with the offers of the customer the form rents for (its account may differ from the first's).
    customers = list(selectors.customer_list_for_renting(user=request.user).select_related("default_credential"))
    credential = _chosen_customer(customers, request.GET.get("customer")).default_credential if customers else None
    listing, error = _listing_or_error(request, credential=credential)
    fabric = listing.fabric(request.GET.get("fabric", "")) if listing else None
    if listing is None or fabric is None:
        # Answer 200 so htmx swaps the message in (it ignores 4xx), and the next change can recover.
        error = error or "That fabric is not offered any more; go back to the fabrics."
        return render(request, "rentals/rent.html#summary", {"summary": None, "error": error})
    form = RentForm(
        request.GET,
        fabric=fabric,
        listing=listing,
        templates=[],
        customers=[],
        may_set_customer_ref=False,
    )
    return render(request, "rentals/rent.html#summary", {"fabric": fabric, **_summary(fabric, form)})


@login_required
def rental_list(request: HttpRequest) -> HttpResponse:
    """List the rentals this user may see, newest first, with filters."""
    rentals = selectors.rental_list_for_user(user=request.user)
    status = request.GET.get("status", "")
    if status in S.values:
        rentals = rentals.filter(status=status)
    ref = request.GET.get("ref", "").strip()
    if "\x00" in ref:
        rentals = rentals.none()  # no ref holds a NUL, and PostgreSQL refuses one in a query
    elif ref:
        rentals = rentals.filter(customer_ref=ref)
    # The list never shows the stored request bytes or long error texts: do not load them.
    rentals = rentals.defer("request_body", "error_message", "error_hint").order_by("-created_at", "-id")
    # Keyset pagination: "older than this row" reads the (customer, created) index, however deep the page.
    before = _parse_cursor(request.GET.get("before", ""))
    if before is not None:
        at, pk = before
        # created_at <= at first: a range on the index's second column; the OR only settles equal timestamps.
        rentals = rentals.filter(Q(created_at__lte=at) & (Q(created_at__lt=at) | Q(id__lt=pk)))
    rows = list(rentals[: RENTALS_PER_PAGE + 1])
    page = rows[:RENTALS_PER_PAGE]
    older = _cursor(page[-1]) if len(rows) > RENTALS_PER_PAGE else ""
    query = request.GET.copy()
    query["fragment"] = "rows"
    context = {
        "page": page,
        "older": older,
        "is_first_page": before is None,
        "statuses": S.choices,
        "filters": {"status": status, "ref": ref},
        # In-flight rows refresh themselves (one request for the visible page) until none is in flight.
        "any_in_flight": any(rental.is_in_flight for rental in page),
        "rows_query": query.urlencode(),
    }
    if request.GET.get("fragment") == "rows":
        return render(request, "rentals/rental_list.html#rows", context)
    context["spend"] = [
        {"customer": customer, "current": selectors.customer_hourly_spend(customer=customer)}
        for customer in selectors.customer_list_for_user(user=request.user)
        if customer.hourly_spend_cap_usd is not None and not is_staff_reader(request.user)
    ]
    return render(request, "rentals/rental_list.html", context)


RENTALS_PER_PAGE = 25


def _cursor(rental: Rental) -> str:
    return f"{rental.created_at.isoformat()}_{rental.pk}"


def _parse_cursor(value: str) -> tuple[datetime, int] | None:
    """Read an "older than" cursor; a garbled one means the first page."""
    at, _, pk = value.rpartition("_")
    try:
        moment, row = datetime.fromisoformat(at), int(pk)
        if moment.tzinfo is None or not 0 < row < 2**62:
            return None
        return moment.astimezone(UTC), row
    except (ValueError, OverflowError):
        return None


@login_required
def rental_detail(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Show one rental with its live progress, attempts and members."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    support_reads(user=request.user, rentals=[rental])
    poll_url = reverse("rental_progress", kwargs={"public_id": rental.public_id})
    context = progress.progress_context(request, rental, may_act=_may_act(request), poll_url=poll_url)
    return render(request, "rentals/rental_detail.html", context)


def rental_progress(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Answer the rental page's poll; one without a valid token gets the full check first."""

    def check() -> tuple[Rental, bool]:
        rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
        support_reads(user=request.user, rentals=[rental])
        return rental, _may_act(request)

    return progress.answer_poll(request, public_id, check=check)


@login_required
@require_http_methods(["GET", "POST"])
def rental_terminate(request: HttpRequest, public_id: str) -> HttpResponse:
    """Confirm (GET), then remove (POST) the rental's cluster: the customer's own, or any for operators."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    if not _may_act(request):
        return HttpResponse("Support can look but not change rentals.", status=403)
    if request.method == "GET":
        return render(request, "rentals/terminate_confirm.html", {"rental": rental})
    try:
        if services.rental_terminate(rental=rental, actor=_user(request), reason=_reason(request)):
            messages.success(request, "Removing the cluster.")
        else:
            messages.error(request, "This rental has no cluster to remove.")
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    return redirect(reverse("rental_detail", kwargs={"public_id": rental.public_id}))


@login_required
@require_POST
def rental_cancel(request: HttpRequest, public_id: str) -> HttpResponse:
    """Cancel a rental that has not been sent yet."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    if not _may_act(request):
        return HttpResponse("Support can look but not change rentals.", status=403)
    if services.rental_cancel(rental=rental, actor=_user(request), reason=_reason(request)):
        messages.success(request, "Cancelled. Nothing was rented.")
    else:
        messages.error(request, "Too late to cancel: the order has already been sent.")
    return redirect(reverse("rental_detail", kwargs={"public_id": rental.public_id}))


REASON_MAX_LENGTH = 1000


def _reason(request: HttpRequest) -> str:
    """Return the posted reason fit for the timeline: no NUL (PostgreSQL refuses it), at most 1000 characters."""
    return str(request.POST.get("reason", "")).replace("\x00", "")[:REASON_MAX_LENGTH]


def _may_act(request: HttpRequest) -> bool:
    """Return whether the user may change a rental they can see: members and operators yes, support no.

    Callers have already fetched the rental through the scoped selector, so a non-staff user who got
    this far is a member of the rental's customer.
    """
    return is_operator(request.user) or not is_staff_reader(request.user)


def _user(request: HttpRequest) -> User:
    """Return the logged-in user (the views that call this are behind login_required)."""
    assert isinstance(request.user, User)
    return request.user


@login_required
@require_POST
def rental_schedule_removal(request: HttpRequest, public_id: str) -> HttpResponse:
    """Ask the upstream to remove every member of the cluster automatically after some hours."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    if not _may_act(request):
        return HttpResponse("Support can look but not change rentals.", status=403)
    try:
        hours = int(request.POST.get("hours", ""))
        if not 1 <= hours <= 720:
            raise ValueError
    except ValueError:
        messages.error(request, "Enter a whole number of hours from 1 to 720.")
    else:
        try:
            at = services.rental_schedule_removal(rental=rental, actor=_user(request), hours=hours)
        except ValidationError as exc:
            messages.error(request, exc.messages[0])
        else:
            messages.success(request, f"Every member will be removed at {at:%Y-%m-%d %H:%M} UTC.")
    return redirect(reverse("rental_detail", kwargs={"public_id": rental.public_id}))
