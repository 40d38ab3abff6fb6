from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Customers and credentials"

    def ready(self) -> None:
        from accounts.account_events import account_events_connect

        account_events_connect()
