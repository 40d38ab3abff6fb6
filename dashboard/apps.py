from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The site itself: registers the start-up checks of dashboard/checks.py."""

    name = "dashboard"
    verbose_name = "Dashboard site"

    def ready(self) -> None:
        from dashboard import checks  # noqa: F401 - registers the checks
