"""The admin as a second console on rentals; upstream fields are read-only."""

from django.contrib import admin

from rentals.models import ClusterMember, Rental, RentalEvent, RentAttempt


class RentAttemptInline(admin.TabularInline):
    model = RentAttempt
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in RentAttempt._meta.fields]

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


class ClusterMemberInline(admin.TabularInline):
    model = ClusterMember
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in ClusterMember._meta.fields]

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(Rental)
class RentalAdmin(admin.ModelAdmin):
    list_display = ["pod_name", "status", "customer", "customer_ref", "node_count", "replayed", "created_at"]
    list_filter = ["status", "customer", "replayed"]
    search_fields = ["=public_id", "=idempotency_key", "pod_name", "customer_ref", "cluster_id", "error_request_id"]
    list_select_related = ["customer", "credential"]
    readonly_fields = [f.name for f in Rental._meta.fields if f.name != "request_body"]
    exclude = ["request_body"]
    inlines = [RentAttemptInline, ClusterMemberInline]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(RentalEvent)
class RentalEventAdmin(admin.ModelAdmin):
    list_display = ["at", "rental", "kind", "actor", "from_status", "to_status", "message"]
    list_filter = ["kind"]
    list_select_related = ["rental", "actor"]

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return request.user.is_superuser
