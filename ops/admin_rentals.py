"""The admin as a second console on rentals; upstream fields are read-only.

Its actions call the same services as the ops pages, so each is recorded once, as the same `staff_action`
timeline entry (`rentals.audit`), with the reason "Via the Django admin."
"""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.urls import reverse

from accounts.roles import is_operator
from common.read_only_admin import ReadOnlyAdmin
from ops.services import ops_reconcile  # the same look, rules and timeline record as the ops page
from rentals import services
from rentals.models import ClusterMember, Rental, RentalEvent, RentAttempt
from rentals.states import RentalStatus

ADMIN_REASON = "Via the Django admin."


def _operator_only(modeladmin, request) -> bool:  # type: ignore[no-untyped-def]
    if not is_operator(request.user):
        modeladmin.message_user(request, "Only operators may act on rentals.", messages.ERROR)
        return False
    return True


@admin.action(description="Cancel selected queued rentals")
def cancel_rentals(modeladmin, request, queryset) -> None:  # type: ignore[no-untyped-def]
    if _operator_only(modeladmin, request):
        done = sum(services.rental_cancel(rental=r, actor=request.user, reason=ADMIN_REASON) for r in queryset)
        modeladmin.message_user(request, f"Cancelled {done} of {queryset.count()} rentals (only queued ones can be).")


@admin.action(description="Terminate selected clusters")
def terminate_rentals(modeladmin, request, queryset) -> None:  # type: ignore[no-untyped-def]
    if not _operator_only(modeladmin, request):
        return
    done = 0
    for rental in queryset.select_related("credential"):
        try:
            done += services.rental_terminate(rental=rental, actor=request.user, reason=ADMIN_REASON)
        except ValidationError as exc:
            modeladmin.message_user(request, f"{rental}: {exc.messages[0]}", messages.WARNING)
    modeladmin.message_user(request, f"Terminating {done} clusters.")


@admin.action(description="Reconcile selected outcome-unknown rentals (or rented ones whose members never appeared)")
def reconcile_rentals(modeladmin, request, queryset) -> None:  # type: ignore[no-untyped-def]
    if not _operator_only(modeladmin, request):
        return
    for rental in queryset.filter(status__in=(RentalStatus.UNKNOWN, RentalStatus.RENTED)).select_related("credential"):
        try:
            found = ops_reconcile(rental=rental, actor=request.user, reason=ADMIN_REASON)
        except ValidationError as exc:
            modeladmin.message_user(request, f"{rental}: {exc.messages[0]}", messages.WARNING)
            continue
        timeline = reverse("ops:rental", kwargs={"public_id": rental.public_id})
        modeladmin.message_user(request, f"{rental}: {found} See {timeline}.")


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
class RentalAdmin(ReadOnlyAdmin):
    # Read-only: a save would write back status, lease and version as read, behind rentals.transitions.
    # The actions still act, each through its service.
    list_display = ["pod_name", "status", "customer", "customer_ref", "node_count", "replayed", "created_at"]
    list_filter = ["status", "customer", "credential", "replayed", "possibly_sent", "created_at"]
    # No action here sends an order again: a replay goes through the ops page and the engine's claim, which
    # refuses a possibly-sent order to a backend that does not promise idempotency.
    search_fields = ["=public_id", "=idempotency_key", "pod_name", "customer_ref", "cluster_id", "error_request_id"]
    list_select_related = ["customer", "credential"]
    actions = [cancel_rentals, terminate_rentals, reconcile_rentals]
    readonly_fields = [f.name for f in Rental._meta.fields if f.name != "request_body"]
    exclude = ["request_body"]
    inlines = [RentAttemptInline, ClusterMemberInline]


@admin.register(RentalEvent)
class RentalEventAdmin(admin.ModelAdmin):
    list_display = ["at", "rental", "kind", "actor", "from_status", "to_status", "message"]
    list_filter = ["kind", "at"]
    list_select_related = ["rental", "actor"]
    search_fields = ["=rental__public_id", "actor__username"]

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return request.user.is_superuser
