"""A customer's team and sign-in: its admins require two-factor for every member, see a member's sessions and
sign them out (`accounts.two_factor`, `accounts.user_sessions`). Operators may do the same; support may not."""

from __future__ import annotations

from allauth.usersessions.adapter import get_adapter as get_sessions_adapter
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.audit import account_change_record
from accounts.user_sessions import sessions_list
from accounts.users import request_user
from billing.views import _managed_customer, _managed_membership


@require_POST
@login_required
def two_factor_require(request: HttpRequest, customer_id: int) -> HttpResponse:
    """Require two-factor of every member (from their next sign-in), or stop requiring it."""
    customer = _managed_customer(request, customer_id)
    required = request.POST.get("require") == "1"
    if customer.require_two_factor != required:
        customer.require_two_factor = required
        customer.save(update_fields=["require_two_factor"])
        what = f"{'required' if required else 'stopped requiring'} two-factor for the members of {customer.name}"
        account_change_record(user=request_user(request), what=what, request=request)
    if required:
        messages.success(request, "Two-factor is required: members without it set it up at their next sign-in.")
    else:
        messages.success(request, "Two-factor is no longer required of this team's members.")
    return redirect("billing:team", customer_id=customer.pk)


@require_GET
@login_required
def member_sessions(request: HttpRequest, customer_id: int, pk: int) -> HttpResponse:
    """A member's signed-in sessions: where from, which browser, since and last seen."""
    membership = _managed_membership(request, customer_id, pk)
    context = {"membership": membership, "customer": membership.customer, "sessions": sessions_list(membership.user)}
    return render(request, "billing/member_sessions.html", context)


@require_POST
@login_required
def member_sessions_end(request: HttpRequest, customer_id: int, pk: int) -> HttpResponse:
    """Sign a member out of every session (the admin's own current session is never among them)."""
    membership = _managed_membership(request, customer_id, pk)
    sessions = [s for s in sessions_list(membership.user) if s.session_key != request.session.session_key]
    get_sessions_adapter().end_sessions(sessions)
    name = membership.user.get_username()
    messages.success(request, f"{name} is signed out of {len(sessions)} session(s) and was told by e-mail.")
    return redirect("billing:member_sessions", customer_id=customer_id, pk=pk)
