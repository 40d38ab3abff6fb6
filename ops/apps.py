from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations and support"

    def ready(self) -> None:
        """Keep the overview's tallies in step with rentals and attempts (see `ops.tallies`)."""
        from django.db.models.signals import post_delete, post_save

        from ops import tallies
        from rentals.models import Rental, RentAttempt
        from rentals.signals import rental_status_changed

        post_save.connect(tallies.on_rental_saved, sender=Rental, dispatch_uid="ops-tally-rental-created")
        post_delete.connect(tallies.on_rental_deleted, sender=Rental, dispatch_uid="ops-tally-rental-deleted")
        post_save.connect(tallies.on_attempt_saved, sender=RentAttempt, dispatch_uid="ops-tally-attempt")
        rental_status_changed.connect(
            tallies.on_rental_status_changed, sender=Rental, dispatch_uid="ops-tally-state-change"
        )
