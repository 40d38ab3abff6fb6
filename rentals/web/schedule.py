"""The rental page's form for a scheduled start: move its time while it is still `scheduled` (cancel is the
page's usual Cancel order)."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.users import request_user
from rentals.orders import scheduled
from rentals.web.forms import START_AT_FORMATS
from rentals.web.lifecycle import rental_to_change


class RescheduleForm(forms.Form):
    start_at = forms.DateTimeField(label="Start at (UTC)", input_formats=START_AT_FORMATS)


@login_required
@require_POST
def rental_reschedule(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Move a scheduled rental's start time (members and operators; support reads only)."""
    rental = rental_to_change(request, public_id)
    form = RescheduleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the new start time as a date and time in UTC (YYYY-MM-DD HH:MM).")
        return redirect("rentals:rental_detail", public_id=rental.public_id)
    try:
        moved = scheduled.rental_reschedule(
            rental=rental, start_at=form.cleaned_data["start_at"], actor=request_user(request)
        )
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    else:
        if moved:
            messages.success(request, "The start time is changed.")
        else:
            messages.error(request, "Too late to change: the order is no longer scheduled.")
    return redirect("rentals:rental_detail", public_id=rental.public_id)
