"""The failed fabric check's two buttons: keep the cluster unverified, or rent again without the slow
node(s). Read through the scoped selector (404 for another customer's rental); support reads only (403)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.users import request_user
from rentals.orders.service import OrderRefused
from rentals.upstream import UpstreamError
from rentals.verification.choices import fabric_check_keep, fabric_check_rent_again
from rentals.web.lifecycle import rental_to_change


@login_required
@require_POST
def rental_check_keep(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Keep a cluster whose fabric check failed: ready, marked unverified."""
    rental = rental_to_change(request, public_id)
    if fabric_check_keep(rental=rental, actor=request_user(request)):
        messages.success(request, "Kept as it is: the cluster is ready, marked unverified.")
    else:
        messages.error(request, "Only a cluster whose fabric check failed can be kept this way.")
    return redirect("rentals:rental_detail", public_id=rental.public_id)


@login_required
@require_POST
def rental_check_rent_again(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Terminate a cluster whose check failed and rent again without its slow node(s); show the new rental."""
    rental = rental_to_change(request, public_id)
    try:
        again = fabric_check_rent_again(rental=rental, user=request_user(request))
    except OrderRefused as exc:
        messages.error(request, f"Nothing was changed: {exc.message}")
        return redirect("rentals:rental_detail", public_id=rental.public_id)
    except UpstreamError as exc:
        messages.error(request, f"Nothing was changed: Lium's offers could not be read now ({exc}). Try again.")
        return redirect("rentals:rental_detail", public_id=rental.public_id)
    messages.success(request, "The slow cluster is being removed; this is its replacement, without the slow node(s).")
    return redirect("rentals:rental_detail", public_id=again.public_id)
