"""Admin for upstream credentials: the secret is write-only, and the account behind open rentals cannot change."""

from django import forms
from django.contrib import admin, messages

from accounts.models import UpstreamCredential
from rentals.models import Rental
from rentals.states import FINAL_STATES
from rentals.upstream.credentials import credential_test_connection


class UpstreamCredentialForm(forms.ModelForm):
    secret = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: leave empty to keep the current secret. Only its last 4 characters are ever shown.",
    )

    base_url = forms.URLField(required=False, assume_scheme="https", help_text="Empty means LIUM_BASE_URL.")

    class Meta:
        model = UpstreamCredential
        fields = ["name", "scheme", "base_url", "customer_ref", "active"]

    def clean(self) -> dict:
        data = super().clean() or {}
        secret = data.get("secret")
        changes_account = bool(secret) or "base_url" in self.changed_data
        if self.instance.pk and changes_account and self._has_rentals_in_flight():
            # Idempotency keys live per upstream account: a retry or replay under another key or base URL
            # would be a new order, so the account behind open rentals must not change under them.
            raise forms.ValidationError(
                "Rentals that are not settled yet use this credential; changing its secret or base URL could "
                "rent them twice. Create a new credential (and point the customers at it) instead."
            )
        if not self.instance.pk and not secret:
            self.add_error("secret", "A new credential needs its secret.")
        elif secret:
            try:
                self.instance.set_secret(secret)
            except forms.ValidationError as exc:
                self.add_error("secret", exc)
        return data

    def _has_rentals_in_flight(self) -> bool:
        return Rental.objects.filter(credential_id=self.instance.pk).exclude(status__in=FINAL_STATES).exists()


@admin.register(UpstreamCredential)
class UpstreamCredentialAdmin(admin.ModelAdmin):
    form = UpstreamCredentialForm
    list_display = ["name", "scheme", "secret_hint", "effective_base_url", "customer_ref", "active"]
    list_filter = ["scheme", "active"]
    search_fields = ["name", "customer_ref"]
    actions = ["test_connection"]

    @admin.action(description="Test connection (GET /version and /users/me)")
    def test_connection(self, request, queryset) -> None:  # type: ignore[no-untyped-def]
        for credential in queryset:
            report = credential_test_connection(credential=credential)
            self.message_user(request, report.message, messages.SUCCESS if report.ok else messages.ERROR)

    @admin.display(description="Secret")
    def secret_hint(self, obj: UpstreamCredential) -> str:
        return f"…{obj.secret_last4}"
