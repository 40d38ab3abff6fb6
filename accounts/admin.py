"""Admin for customers and memberships (upstream credentials: `ops.admin_credentials`, which knows rentals)."""

from django import forms
from django.contrib import admin

from accounts.models import Customer, Membership


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class CustomerForm(forms.ModelForm):
    # strip=False: a trailing newline must be refused, not silently removed.
    customer_ref = forms.CharField(required=False, strip=False, max_length=64)

    class Meta:
        model = Customer
        fields = ["name", "customer_ref", "default_credential", "verify_fabric_default", "active"]


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    form = CustomerForm
    list_display = ["name", "customer_ref", "default_credential", "active"]
    list_filter = ["active", "default_credential"]
    search_fields = ["name", "customer_ref"]
    list_select_related = ["default_credential"]
    inlines = [MembershipInline]
