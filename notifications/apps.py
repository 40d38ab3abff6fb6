from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Webhooks and e-mail notifications"

    def ready(self) -> None:
        from notifications.receivers import on_rental_status_changed
        from rentals.models import Rental
        from rentals.signals import rental_status_changed

        rental_status_changed.connect(on_rental_status_changed, sender=Rental, dispatch_uid="notifications-outbox")
