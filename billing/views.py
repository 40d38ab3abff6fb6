"""Money pages: usage and its CSV, a customer's team and budget, invitations, the staff budget list.

Reads are scoped like every other page: a member sees their customers (another customer is 404), support
and operators every customer. Changes to a team are for its customer admins and operators (403 otherwise);
support changes nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.audit import support_read_record
from accounts.models import Customer, Membership
from accounts.roles import is_operator, is_staff_reader
from accounts.users import request_user
from billing import invitations, quotas, selectors, services
from billing.cluster_chart import cluster_chart
from billing.forms import (
    CustomerBudgetForm,
    CustomerQuotaForm,
    InviteForm,
    OperatorBudgetForm,
    OperatorQuotaForm,
    SignupForm,
    UsageFilterForm,
)
from billing.left_keys import left_key_clusters
from billing.models import CustomerBudget, Invitation
from billing.roles import is_customer_admin, may_manage_team
from billing.selectors import BudgetStatus
from billing.spend_chart import SpendChart, spend_chart
from billing.usage import Month, UsageReport
from common.csv_export import csv_response
from rentals.removal.policy import removal_policy_summaries

NEW_INVITATION_KEY = "billing_new_invitation"
INVITATION_TOKEN_KEY = "billing_invitation_token"  # noqa: S105 (a session key's name)


def _usage(request: HttpRequest, *, what: str) -> tuple[UsageFilterForm, UsageReport, Customer | None]:
    customers = list(selectors.customers_for_user(user=request.user).order_by("name").values_list("pk", "name"))
    form = UsageFilterForm(request.GET or None, customers=customers, initial={"month": Month.of(timezone.now()).label})
    month, customer_id, as_of = form.chosen()
    customer = selectors.customer_get_for_user(user=request.user, customer_id=customer_id) if customer_id else None
    report = selectors.usage_for_user(user=request.user, month=month, customer=customer, now=as_of)
    shown = {line.customer_id for line in report.lines} | ({customer.pk} if customer else set())
    support_read_record(user=request.user, customer_ids=shown, what=what)
    return form, report, customer


@require_GET
@login_required
def usage(request: HttpRequest) -> HttpResponse:
    """The month's cost lines and total, with each visible customer's budget (staff: the chosen one's)."""
    form, report, customer = _usage(request, what="usage page")
    if customer is not None:
        shown = [customer]
    elif is_staff_reader(request.user):
        shown = []
    else:
        shown = list(selectors.customers_for_user(user=request.user).order_by("name"))
    budgets = [selectors.budget_status(customer=c) for c in shown]
    charts = {
        "spend": _spend_charts(report, budgets),
        "clusters": cluster_chart(lines=report.lines),
    }
    query = urlencode(
        {
            "month": report.month.label,
            "as_of": report.as_of.isoformat(),
            **({"customer": customer.pk} if customer else {}),
        }
    )
    context = {"form": form, "report": report, "budgets": budgets, "charts": charts, "query": query}
    return render(request, "billing/usage.html", context)


def _spend_charts(report: UsageReport, budgets: list[BudgetStatus]) -> list[tuple[BudgetStatus | None, SpendChart]]:
    """One spend line per budget shown (that customer's lines); staff looking at every customer: one, no budget."""
    if not budgets:
        return [(None, spend_chart(lines=report.lines, month=report.month, as_of=report.as_of, budget_usd=None))]
    return [
        (
            status,
            spend_chart(
                lines=[line for line in report.lines if line.customer_id == status.customer.pk],
                month=report.month,
                as_of=report.as_of,
                budget_usd=status.budget_usd,
            ),
        )
        for status in budgets
    ]


@require_GET
@login_required
def usage_csv(request: HttpRequest) -> HttpResponse:
    """The same lines and total as the page, as CSV."""
    _form, report, _customer = _usage(request, what="usage CSV")
    header = [
        *("id", "pod_name", "customer", "customer_ref", "started", "ended"),
        *("hours", "price_per_hour", "cost_usd", "estimate", "confirmed"),
    ]
    rows: list[list[object]] = [
        [
            line.rental_id,
            line.pod_name,
            line.customer_name,
            line.customer_ref,
            line.started.isoformat(),
            line.ended.isoformat() if line.ended else "",
            line.hours,
            line.price_per_hour,
            line.cost_usd,
            "yes" if line.estimate else "no",
            "yes" if line.confirmed else "no",
        ]
        for line in report.lines
    ]
    rows.append(["total", "", "", "", "", "", "", "", report.total_usd, "", ""])
    return csv_response(filename=f"usage-{report.month.label}.csv", header=header, rows=rows)


def _team_context(request: HttpRequest, customer: Customer, **extra: Any) -> dict[str, Any]:
    manage = may_manage_team(request.user, customer)
    budget = CustomerBudget.objects.filter(customer=customer).first()
    quota = quotas.quota_for(customer)
    return {
        "customer": customer,
        "members": selectors.team_members(customer=customer),
        "invitations": selectors.open_invitations(customer=customer) if manage or is_staff_reader(request.user) else [],
        "status": selectors.budget_status(customer=customer),
        "may_manage": manage,
        # Whoever may act on the team is told which running clusters still let a former member in.
        "left_keys": left_key_clusters(customer=customer) if manage or is_staff_reader(request.user) else [],
        "is_admin": is_customer_admin(request.user, customer),
        "invite_form": InviteForm(),
        "customer_budget_form": CustomerBudgetForm(
            initial={"customer_budget_usd": budget.customer_budget_usd if budget else None}
        ),
        "quota_lines": quotas.quota_lines(customer=customer),
        "quota": quota,
        "operator_quota_form": OperatorQuotaForm(initial={f: getattr(quota, f) for f in OperatorQuotaForm.base_fields}),
        "customer_quota_form": CustomerQuotaForm(initial={f: getattr(quota, f) for f in CustomerQuotaForm.base_fields}),
        "operator_budget_form": OperatorBudgetForm(
            initial={
                "monthly_budget_usd": budget.monthly_budget_usd if budget else None,
                "enforce": budget.enforce if budget else False,
                "grace_hours": budget.grace_hours if budget else 24,
            }
        ),
        **extra,
    }


@require_GET
@login_required
def team(request: HttpRequest, customer_id: int) -> HttpResponse:
    """A customer's members, open invitations and budget; admins and operators act here."""
    customer = selectors.customer_get_for_user(user=request.user, customer_id=customer_id)
    support_read_record(user=request.user, customer_ids=[customer.pk], what="team page")
    # A new invitation's link, kept in the session only until this page shows it (once; a reload shows none).
    shown = request.session.pop(NEW_INVITATION_KEY, None)
    extra: dict[str, Any] = {}
    if shown and shown.get("customer_id") == customer.pk:
        extra = {"new_link": shown["link"], "new": Invitation.objects.filter(pk=shown["id"]).first()}
    return render(request, "billing/team.html", _team_context(request, customer, **extra))


def _managed_customer(request: HttpRequest, customer_id: int) -> Customer:
    """Return a customer this user manages; raise 404 for one they cannot see, 403 for one they only see."""
    customer = selectors.customer_get_for_user(user=request.user, customer_id=customer_id)
    if not may_manage_team(request.user, customer):
        raise PermissionDenied("Only this customer's admins and operators can change its team and budget.")
    return customer


@require_POST
@login_required
def invite_create(request: HttpRequest, customer_id: int) -> HttpResponse:
    """Make an invitation link and show it once."""
    customer = _managed_customer(request, customer_id)
    form = InviteForm(request.POST)
    role = form.cleaned_data["role"] if form.is_valid() else Invitation.Role.MEMBER
    new = invitations.invitation_create(customer=customer, created_by=request_user(request), role=role)
    link = request.build_absolute_uri(reverse("billing:invite_landing", args=[new.token]))
    request.session[NEW_INVITATION_KEY] = {"customer_id": customer.pk, "id": new.invitation.pk, "link": link}
    return redirect("billing:team", customer_id=customer.pk)


@require_POST
@login_required
def invite_revoke(request: HttpRequest, customer_id: int, pk: int) -> HttpResponse:
    customer = _managed_customer(request, customer_id)
    invitations.invitation_revoke(invitation=get_object_or_404(Invitation, pk=pk, customer=customer))
    messages.success(request, "The invitation link no longer works.")
    return redirect("billing:team", customer_id=customer.pk)


@require_POST
@login_required
def member_remove(request: HttpRequest, customer_id: int, pk: int) -> HttpResponse:
    """Remove a member of this customer."""
    membership = _managed_membership(request, customer_id, pk)
    try:
        invitations.member_remove(membership=membership, by=request_user(request))
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    else:
        name = membership.user.get_username()
        messages.success(request, f"{name} is no longer a member of {membership.customer.name}.")
    return redirect("billing:team", customer_id=customer_id)


@require_POST
@login_required
def member_admin(request: HttpRequest, customer_id: int, pk: int) -> HttpResponse:
    """Make a member an admin of this customer, or a plain member again."""
    membership = _managed_membership(request, customer_id, pk)
    invitations.admin_set(membership=membership, admin=request.POST.get("admin") == "1")
    return redirect("billing:team", customer_id=customer_id)


def _managed_membership(request: HttpRequest, customer_id: int, pk: int) -> Membership:
    """Return a membership of a customer this user manages (never another customer's: the membership is looked
    up within the customer); raise 404 or 403 as `_managed_customer` does."""
    customer = _managed_customer(request, customer_id)
    membership = get_object_or_404(Membership.objects.select_related("user"), pk=pk, customer=customer)
    membership.customer = customer
    return membership


@require_POST
@login_required
def budget_set(request: HttpRequest, customer_id: int) -> HttpResponse:
    """Operators set the budget and enforcement; the customer's admins may lower it for themselves."""
    customer = _managed_customer(request, customer_id)
    if is_operator(request.user) and "monthly_budget_usd" in request.POST:
        operator_form = OperatorBudgetForm(request.POST)
        if not operator_form.is_valid():
            return render(
                request,
                "billing/team.html",
                _team_context(request, customer, operator_budget_form=operator_form),
                status=400,
            )
        services.budget_set_by_operator(customer=customer, **operator_form.cleaned_data)
    else:
        form = CustomerBudgetForm(request.POST)
        try:
            if not form.is_valid():
                raise ValidationError("Give the budget as an amount in USD, or leave it empty.")
            services.budget_set_by_customer(
                customer=customer, customer_budget_usd=form.cleaned_data["customer_budget_usd"]
            )
        except ValidationError as exc:
            form.add_error(None, exc)
            return render(
                request, "billing/team.html", _team_context(request, customer, customer_budget_form=form), status=400
            )
    messages.success(request, f"The budget of {customer.name} is saved.")
    return redirect("billing:team", customer_id=customer.pk)


@require_POST
@login_required
def quota_set(request: HttpRequest, customer_id: int) -> HttpResponse:
    """Operators set the quotas; the customer's admins may set lower ones for their team."""
    customer = _managed_customer(request, customer_id)
    operator = is_operator(request.user) and "max_gpus" in request.POST
    form: forms.Form = OperatorQuotaForm(request.POST) if operator else CustomerQuotaForm(request.POST)
    try:
        if form.is_valid():
            setter = quotas.quota_set_by_operator if operator else quotas.quota_set_by_customer
            setter(customer=customer, **form.cleaned_data)
    except ValidationError as exc:
        form.add_error(None, exc)
    if form.errors:
        name = "operator_quota_form" if operator else "customer_quota_form"
        return render(request, "billing/team.html", _team_context(request, customer, **{name: form}), status=400)
    messages.success(request, f"The quotas of {customer.name} are saved.")
    return redirect("billing:team", customer_id=customer.pk)


def _no_referrer(response: HttpResponse, *, policy: str = "no-referrer") -> HttpResponse:
    # The invitation pages never hand their address (a token, on the landing) to another site, nor get cached.
    # A page with a form says "same-origin": under "no-referrer" browsers send `Origin: null` with the form's
    # POST, which Django's CSRF check refuses.
    response["Referrer-Policy"] = policy
    response["Cache-Control"] = "no-store"
    return response


def _invite_problem(request: HttpRequest, message: str) -> HttpResponse:
    return _no_referrer(render(request, "billing/invite_accept.html", {"problem": message}, status=410))


@require_http_methods(["GET", "POST"])
def invite_landing(request: HttpRequest, token: str) -> HttpResponse:
    """The link's landing: keep the token in this browser's session and move on to `/invite/`, whose address
    holds no token (history, bookmarks, a Referer never see it; the log line of this request is redacted).
    A POST here (an old form) is still accepted."""
    if request.method == "POST":
        return _invite_answer(request, token)
    try:
        invitations.invitation_find(token=token)
    except ValidationError as exc:
        return _invite_problem(request, exc.messages[0])
    request.session[INVITATION_TOKEN_KEY] = token
    return _no_referrer(redirect("billing:invite_accept"))


@require_http_methods(["GET", "POST"])
def invite_accept(request: HttpRequest) -> HttpResponse:
    """Join the inviting customer: logged in, with one click; otherwise by creating an account here."""
    token = request.session.get(INVITATION_TOKEN_KEY)
    if not isinstance(token, str):
        return _invite_problem(request, "Open your invitation link again: this browser has none.")
    return _invite_answer(request, token)


def _invite_answer(request: HttpRequest, token: str) -> HttpResponse:
    try:
        invitation = invitations.invitation_find(token=token)
    except ValidationError as exc:
        return _invite_problem(request, exc.messages[0])
    anonymous = not request.user.is_authenticated
    form = SignupForm(request.POST if request.method == "POST" and anonymous else None)
    if request.method == "POST" and (not anonymous or form.is_valid()):
        try:
            # The account is created inside the claim's transaction: a refused claim leaves none behind.
            user = invitations.invitation_accept(
                token=token, user=None if anonymous else request_user(request), signup=form.save
            ).user
        except ValidationError as exc:
            return _invite_problem(request, exc.messages[0])
        request.session.pop(INVITATION_TOKEN_KEY, None)
        if anonymous:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"You are now a member of {invitation.customer.name}.")
        return redirect("rentals:rental_list")
    page = render(request, "billing/invite_accept.html", {"invitation": invitation, "form": form})
    return _no_referrer(page, policy="same-origin")


@require_GET
@login_required
def budgets(request: HttpRequest) -> HttpResponse:
    """Staff: every customer's month-to-date spend against its budget."""
    if not is_staff_reader(request.user):
        raise PermissionDenied("This page is for support and operators.")
    customers = list(Customer.objects.filter(active=True).order_by("name"))
    # Each customer's removal policy beside its budget: this is where staff look at every customer at once.
    policies = removal_policy_summaries(customer_ids=[customer.pk for customer in customers])
    rows = [(selectors.budget_status(customer=c), policies[c.pk]) for c in customers]
    return render(request, "billing/budgets.html", {"rows": rows})
