"""The rental page's member repair: a small confirm page per member and action (like Terminate), then the click.

GET shows what will happen and a form carrying a fresh click token; POST records the click once
(`rentals.repair.services.member_repair_ask`: the same token twice is the same click) and goes back to the rental page,
which follows the request. Members of the rental's customer and operators may; support reads only (403).
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.users import request_user
from rentals.repair import services as repair
from rentals.web.lifecycle import rental_to_change

ACTION_OF_URL = {"reboot": repair.REBOOT, "reset-gpu": repair.RESET_GPU}


@login_required
@require_http_methods(["GET", "POST"])
def member_repair(request: HttpRequest, public_id: uuid.UUID, rank: int, action: str) -> HttpResponse:
    """Confirm (GET), then ask (POST) a reboot or a GPU reset of the member of `rank`."""
    rental = rental_to_change(request, public_id)
    kind = ACTION_OF_URL[action]
    back = redirect("rentals:rental_detail", public_id=rental.public_id)
    if request.method == "GET":
        try:
            member = repair.repair_member(rental=rental, rank=rank)
        except ValidationError as exc:
            messages.error(request, exc.messages[0])
            return back
        context = {"rental": rental, "member": member, "action": kind, "token": uuid.uuid4()}
        return render(request, "rentals/repair_confirm.html", context)
    token = str(request.POST.get("token", "")).strip()
    if not token:
        messages.error(request, "This form has expired: open Reboot or Reset GPUs again from the members table.")
        return back
    try:
        _event, created = repair.member_repair_ask(
            rental=rental,
            rank=rank,
            action=kind,
            actor=request_user(request),
            reason=str(request.POST.get("reason", "")),
            token=token,
        )
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
        return back
    what = repair.ACTIONS[kind]
    if created:
        messages.success(request, f"{what} of rank {rank} asked: its progress shows below.")
    else:
        messages.info(request, f"{what} of rank {rank} was already asked by this click: it is sent once.")
    return back
