"""The user's profile: saved SSH keys."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.forms import SshPublicKeyForm
from accounts.models import SshPublicKey


@login_required
@require_http_methods(["GET", "POST"])
def ssh_keys(request: HttpRequest) -> HttpResponse:
    """List the user's saved SSH keys and add one."""
    form = SshPublicKeyForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Key saved. It is offered on the rent form from now on.")
        return redirect("accounts:ssh_keys")
    keys = SshPublicKey.objects.filter(user_id=request.user.pk or 0)
    return render(request, "accounts/ssh_keys.html", {"form": form, "keys": keys})


@login_required
@require_POST
def ssh_key_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete one of the user's saved keys (another user's key is a 404)."""
    key = get_object_or_404(SshPublicKey, pk=pk, user_id=request.user.pk)
    key.delete()
    messages.success(request, f"Key {key.name} deleted.")
    return redirect("accounts:ssh_keys")
