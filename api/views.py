"""Profile pages: create API keys (shown once) and revoke them."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.users import request_user
from api.forms import ApiKeyForm
from api.keys import api_key_create, api_key_list_for_user
from api.keys import api_key_revoke as revoke_key
from api.models import ApiKey


@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request: HttpRequest) -> HttpResponse:
    """List the user's keys and create one; a new key's full text is rendered once, in this response only."""
    new_key = None
    form = ApiKeyForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        try:
            _key, new_key = api_key_create(
                user=request_user(request),
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_at=form.expires_at(),
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            form = ApiKeyForm()
    response = render(
        request,
        "api/api_keys.html",
        {"form": form, "keys": api_key_list_for_user(user=request_user(request)), "new_key": new_key},
    )
    # The page may carry a secret: never cache it.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def api_key_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of the user's own keys (another user's key is a 404, like any object that is not yours)."""
    get_object_or_404(ApiKey, pk=pk, user_id=request.user.pk)
    if revoke_key(user=request_user(request), key_id=pk):
        messages.success(request, "Key revoked: it no longer works.")
    else:
        messages.error(request, "No such active key.")
    return redirect("api:keys")
