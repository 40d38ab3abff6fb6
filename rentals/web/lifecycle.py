"""Customer pages of a cluster's lifecycle: its scheduled removal (set, extend, cancel), its connect downloads
(SSH config, env file per node) and, for operators, a customer's removal policy.

Every rental view reads through the scoped selector (404 for another customer's rental); changes need a member
of the rental's customer or an operator (support reads only: 403).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import Customer
from accounts.roles import is_operator, is_staff_reader
from accounts.users import request_user
from rentals import connect, selectors
from rentals.audit import support_reads
from rentals.models import Rental
from rentals.removal import policy as removal_policy
from rentals.removal import schedule as removal_schedule
from rentals.removal.policy import MAX_HOURS

SUPPORT_READS_ONLY = "Support can look but not change rentals."


def _may_act(request: HttpRequest) -> bool:
    """Members (who got the rental through the scoped selector) and operators yes; support no."""
    return is_operator(request.user) or not is_staff_reader(request.user)


def rental_to_change(request: HttpRequest, public_id: uuid.UUID | str) -> Rental:
    """Return the rental through the scoped selector (404 for another customer's); 403 when support asks."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    if not _may_act(request):
        raise PermissionDenied(SUPPORT_READS_ONLY)
    return rental


def _whole_hours(raw: object) -> int | None:
    """Return the posted whole hours 1-720, or None for anything else."""
    text = str(raw or "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 4:
        return None
    hours = int(text)
    return hours if 1 <= hours <= MAX_HOURS else None


@login_required
@require_POST
def rental_removal_schedule_form(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Remove every member `hours` from now, or extend the scheduled removal by `extend_hours`."""
    rental = rental_to_change(request, public_id)
    extend = "extend_hours" in request.POST
    hours = _whole_hours(request.POST.get("extend_hours" if extend else "hours"))
    if hours is None:
        messages.error(request, f"Enter a whole number of hours from 1 to {MAX_HOURS}.")
        return redirect("rentals:rental_detail", public_id=rental.public_id)
    try:
        if extend and rental.removal_scheduled_at is not None:
            at = removal_schedule.rental_schedule_removal(
                rental=rental, actor=request_user(request), at=rental.removal_scheduled_at + timedelta(hours=hours)
            )
        else:
            at = removal_schedule.rental_schedule_removal(rental=rental, actor=request_user(request), hours=hours)
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    else:
        messages.success(request, f"Every member will be removed at {at:%Y-%m-%d %H:%M} UTC.")
    return redirect("rentals:rental_detail", public_id=rental.public_id)


@login_required
@require_POST
def rental_removal_cancel_form(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Cancel the scheduled removal: the cluster then runs until terminated."""
    rental = rental_to_change(request, public_id)
    try:
        cancelled = removal_schedule.rental_cancel_removal(rental=rental, actor=request_user(request))
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    else:
        if cancelled:
            messages.success(request, "Scheduled removal cancelled: the cluster runs until you terminate it.")
        else:
            messages.info(request, "No removal was scheduled.")
    return redirect("rentals:rental_detail", public_id=rental.public_id)


def _attachment(body: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _live_members(rental: Rental) -> list:
    return [member for member in rental.members.all() if member.gone_at is None]


@login_required
def rental_ssh_config(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Download `Host <pod-name>-rank<N>` entries for every member with an SSH line."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    body = connect.ssh_config(rental.pod_name, _live_members(rental))
    if not body:
        raise Http404("No member can be reached over SSH yet.")
    support_reads(user=request.user, rentals=[rental], where="SSH config download")
    return _attachment(body, f"{connect.safe_name(rental.pod_name)}.ssh_config")


@login_required
def rental_env_file(request: HttpRequest, public_id: uuid.UUID, rank: int) -> HttpResponse:
    """Download the torchrun environment of one node (MASTER_ADDR, MASTER_PORT, NODE_RANK, NNODES, WORLD_SIZE)."""
    rental = selectors.rental_get_for_user(user=request.user, public_id=public_id)
    body = connect.env_file(_live_members(rental), gpus_per_node=rental.gpus_per_node, rank=rank)
    if not body:
        raise Http404("No node has this rank.")
    support_reads(user=request.user, rentals=[rental], where=f"env file download, rank {rank}")
    return _attachment(body, f"{connect.host_alias(rental.pod_name, rank)}.env")


class RemovalPolicyForm(forms.Form):
    default_hours = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_HOURS, help_text="Orders without termination hours get this."
    )
    max_hours = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_HOURS,
        help_text="Members may not order, schedule or extend past this many hours from now, nor cancel a removal.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def customer_removal_policy(request: HttpRequest, customer_id: int) -> HttpResponse:
    """Show (staff) or set (operators) a customer's default and maximum cluster life in hours."""
    if not is_staff_reader(request.user):
        raise PermissionDenied("This page is for support and operators.")
    customer = get_object_or_404(Customer, pk=customer_id)
    policy = removal_policy.removal_policy_for(customer)
    initial = {"default_hours": policy.default_hours, "max_hours": policy.max_hours} if policy else {}
    form = RemovalPolicyForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST":
        if not is_operator(request.user):
            raise PermissionDenied("Only operators change the policy.")
        if form.is_valid():
            try:
                removal_policy.removal_policy_set(customer=customer, actor=request_user(request), **form.cleaned_data)
            except ValidationError as exc:
                for field, errors in exc.error_dict.items():
                    form.add_error(field, errors)
            else:
                messages.success(request, f"Saved {customer.name}'s removal policy.")
                return redirect("rentals:customer_removal_policy", customer_id=customer.pk)
    return render(
        request,
        "rentals/removal_policy.html",
        {"customer": customer, "policy": policy, "form": form, "may_change": is_operator(request.user)},
    )
