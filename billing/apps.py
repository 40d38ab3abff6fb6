from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Money: usage, budgets, balance runway, customer admins"

    def ready(self) -> None:
        # Rentals never import billing: the submit service sends `order_checking` with the customer row locked,
        # and the budget check answers it here (rentals → billing → rentals would be an import cycle).
        from django.contrib.auth.models import User
        from django.db.models.signals import pre_delete, pre_save

        from accounts.models import Customer, Membership
        from billing.invitations import membership_deleting, user_deactivating
        from billing.quotas import quota_check_receiver
        from billing.services import budget_check_receiver
        from billing.statement import pod_listing_receiver
        from rentals.signals import order_checking, pod_listing_read

        order_checking.connect(budget_check_receiver, sender=Customer, dispatch_uid="billing-budget-check")
        order_checking.connect(quota_check_receiver, sender=Customer, dispatch_uid="billing-quota-check")
        # A refused pod listing stops tracking: the pod poller says so, and an operator notice is raised here.
        pod_listing_read.connect(pod_listing_receiver, dispatch_uid="billing-pod-listing")
        # A membership deleted by any path ends the invitation links and webhook endpoints its member made.
        pre_delete.connect(membership_deleting, sender=Membership, dispatch_uid="billing-membership-grants")
        # Deactivating a user ends the same grants as removing them, in every customer they belong to.
        pre_save.connect(user_deactivating, sender=User, dispatch_uid="billing-user-deactivated")
