"""Staff pages: the operations overview, support search, a rental's timeline and actions, usage, audit.

Every page is for staff only: customer members get 403 (these pages are not "someone else's rental", so
the 404 rule for rentals does not apply). Support reads everything; every write is for operators only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from accounts.roles import is_operator, is_staff_reader
from accounts.users import request_user
from common.csv_export import csv_response
from ops import search as support_search
from ops import selectors, services
from ops.actions import ACTIONS, actions_offered, operator_action_run
from ops.forms import ActionForm, AuditFilterForm, ConfirmReconciliationForm, SearchForm, UsageForm
from ops.links import rental_page_links
from ops.models import PodEventCursor, UnheldPodEvent
from ops.overview import overview_get
from rentals.audit import support_reads, support_view_record
from rentals.models import Rental
from rentals.selectors import rental_attention_reason

View = Callable[..., HttpResponse]
ACCOUNT_CHANGES_SHOWN = 100  # the audit page's newest changes to people's sign-in (filter by user for older ones)


def staff_required(view: View) -> View:
    """Let in support, operators and superusers; refuse everyone else with 403."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_staff_reader(request.user):
            raise PermissionDenied("These pages are for support and operators.")
        return view(request, *args, **kwargs)

    return wrapper


def operator_required(view: View) -> View:
    """Let in operators and superusers; support may look but not act (403)."""

    @staff_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_operator(request.user):
            raise PermissionDenied("Support can look but not change rentals; ask an operator.")
        return view(request, *args, **kwargs)

    return wrapper


def _rental(public_id: Any) -> Rental:
    return get_object_or_404(Rental.objects.select_related("customer", "credential", "created_by"), public_id=public_id)


@require_GET
@staff_required
def overview(request: HttpRequest) -> HttpResponse:
    """Counts, the needs-attention queue, upstream and worker health; the panel refreshes itself."""
    return render(request, "ops/overview.html", {**overview_get(), "search_form": SearchForm()})


@require_GET
@staff_required
def overview_panel(request: HttpRequest) -> HttpResponse:
    """The polled fragment of the overview."""
    return render(request, "ops/overview.html#panel", overview_get())


@require_GET
@staff_required
def search(request: HttpRequest) -> HttpResponse:
    """Find rentals by any identifier; an exact id that names one rental jumps straight to it."""
    form = SearchForm(request.GET)
    text = form.cleaned_data["q"] if form.is_valid() else ""
    result = support_search.rental_search(text=text)
    if result.exact is not None:
        return redirect("ops:rental", public_id=result.exact["public_id"])
    found = Rental.objects.filter(pk__in=[row["pk"] for row in result.rentals]).only("pk", "customer_id")
    support_reads(user=request.user, rentals=found, where="search results")
    link = rental_page_links()
    for row in result.rentals:
        row["url"] = link(row["public_id"])
    return render(request, "ops/search.html", {"search_form": form, "result": result})


@require_GET
@staff_required
def rental_timeline(request: HttpRequest, public_id: Any) -> HttpResponse:
    """Everything that happened to one rental, its stored request and its key's windows."""
    rental = _rental(public_id)
    user = request_user(request)
    operator = is_operator(user)
    if not operator:
        support_view_record(rental=rental, user=user)
    now = timezone.now()
    finding = selectors.latest_finding(rental=rental)
    attention = rental_attention_reason(rental=rental, now=now)
    return render(
        request,
        "ops/rental.html",
        {
            "rental": rental,
            "timeline": selectors.rental_timeline(rental=rental),
            "body": selectors.request_body_pretty(rental),
            "windows": selectors.idempotency_windows(rental=rental, now=now),
            "finding": finding,
            "attention": attention,
            "actions": actions_offered(rental, finding=finding, attention=attention, now=now) if operator else [],
            "retry_refusal": services.retry_refusal(rental, now) if operator else "",
            "confirm_form": _confirm_form(None, finding),
            "form": ActionForm(),
        },
    )


def _confirm_form(data: Any, finding: Any) -> ConfirmReconciliationForm:
    cluster_ids = list((finding.data or {}).get("cluster_ids", [])) if finding else []
    return ConfirmReconciliationForm(data, cluster_ids=[str(cluster_id) for cluster_id in cluster_ids])


@require_http_methods(["GET", "POST"])
@operator_required
def rental_action(request: HttpRequest, public_id: Any, action: str) -> HttpResponse:
    """Confirm (GET) and perform (POST) one operator action; the reason goes on the timeline."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise Http404("No such action.")
    rental = _rental(public_id)
    finding = selectors.latest_finding(rental=rental) if action == "confirm" else None
    data = request.POST if request.method == "POST" else None
    form = _confirm_form(data, finding) if action == "confirm" else ActionForm(data)
    if request.method == "POST" and form.is_valid():
        try:
            done = operator_action_run(action, rental=rental, actor=request_user(request), form=form)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if done:
                messages.success(request, done)
            else:
                messages.error(request, "Nothing changed: the rental's state does not allow this any more.")
            return redirect("ops:rental", public_id=rental.public_id)
    return render(
        request, "ops/action.html", {"rental": rental, "action": action, "spec": spec, "form": form, "finding": finding}
    )


@require_GET
@staff_required
def usage(request: HttpRequest) -> HttpResponse:
    """Rentals, node-hours and estimated cost per customer ref over a period, as a table and a chart."""
    form = UsageForm(request.GET or None)
    start, end = form.period()
    rows = selectors.usage_by_customer_ref(start=start, end=end)
    return render(
        request,
        "ops/usage.html",
        {"form": form, "rows": rows, "start": start, "end": end, "chart_height": 24 * len(rows) + 4},
    )


@require_GET
@staff_required
def usage_csv(request: HttpRequest) -> HttpResponse:
    """The usage table as CSV."""
    start, end = UsageForm(request.GET or None).period()
    rows = selectors.usage_by_customer_ref(start=start, end=end)
    header = ["customer_ref", "rentals", "node_hours", "estimated_cost_usd", "period_start", "period_end"]
    lines = [[row.customer_ref or "(none)", row.rentals, row.node_hours, row.cost, start, end] for row in rows]
    return csv_response(filename=f"usage-{start}-{end}.csv", header=header, rows=lines)


@require_GET
@staff_required
def audit(request: HttpRequest) -> HttpResponse:
    """Every staff action and support view, and support's other reads of customers' data, filterable by user,
    kind and date."""
    form = AuditFilterForm(request.GET or None)
    filters: dict[str, Any] = {}
    if form.is_valid():
        username = form.cleaned_data["user"].strip()
        if username:
            filters["actor"] = User.objects.filter(username=username).first() or User(pk=0)
        filters["kind"] = form.cleaned_data["kind"]
        filters["since"] = form.cleaned_data["since"]
        filters["until"] = form.cleaned_data["until"]
    page = Paginator(selectors.audit_events(**filters), 50).get_page(request.GET.get("page"))
    # Beside them, support's reads of customers' data that are not about one rental, paged on their own.
    reads = Paginator(selectors.audit_support_reads(**filters), 50).get_page(request.GET.get("reads_page"))
    query = request.GET.copy()
    query.pop("page", None)
    reads_query = request.GET.copy()
    reads_query.pop("reads_page", None)
    context = {"form": form, "page": page, "query": query.urlencode(), "reads": reads}
    context["account_changes"] = selectors.audit_account_changes(**filters)[:ACCOUNT_CHANGES_SHOWN]
    return render(request, "ops/audit.html", {**context, "reads_query": reads_query.urlencode()})


@require_GET
@staff_required
def pod_events(request: HttpRequest) -> HttpResponse:
    """Events of our Lium accounts about pods no rental holds (made outside the dashboard), newest first, and the
    credentials whose backend refuses its events to API keys."""
    rows = UnheldPodEvent.objects.select_related("credential")
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    refused = PodEventCursor.objects.filter(refused_at__isnull=False).select_related("credential")
    return render(request, "ops/pod_events.html", {"page": page, "refused": refused})
