from typing import Any

from django import forms
from django.contrib import admin

from api.keys import ALL_SCOPES
from api.models import ApiKey


class ApiKeyForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["user", "name", "scopes", "expires_at", "revoked_at"]

    def clean_scopes(self) -> list[str]:
        # The JSON box takes any JSON: only a list of known scope names is a key's scopes (and PostgreSQL's
        # jsonb refuses a NUL character, which answered 500).
        scopes: Any = self.cleaned_data.get("scopes")
        if not isinstance(scopes, list) or not scopes or not set(map(str, scopes)) <= set(ALL_SCOPES):
            raise forms.ValidationError(f'Give the scopes as a list of: {", ".join(ALL_SCOPES)}, e.g. ["read"].')
        return [scope for scope in ALL_SCOPES if scope in scopes]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ["name", "prefix", "user", "scopes", "created_at", "last_used_at", "expires_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["prefix", "name", "user__username"]
    readonly_fields = ["prefix", "secret_sha256", "last_used_at", "created_at"]
