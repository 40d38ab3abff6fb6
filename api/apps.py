from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "JSON API and its keys"

    def ready(self) -> None:
        # Events carry a rental exactly as this API shows it (notifications never imports the API).
        from api.representations import rental_dict
        from notifications.payloads import rental_representation_register

        rental_representation_register(rental_dict)
