"""URL configuration: customer pages under /, the admin under /admin/, probes at the root."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from api.urls import api_v1_urls
from dashboard import views
from dashboard.metrics import metrics_view

urlpatterns = [
    # First: the customer pages, whose first pattern is the URL open rental pages poll all day (Django tries
    # the patterns in order).
    path("", include("rentals.web.urls")),
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    # Only the auth views this dashboard offers (no e-mail, so no password reset: an admin resets it).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("profile/api-keys/", include("api.urls")),
    path("profile/", include("accounts.urls")),
    path("profile/", include("notifications.urls")),
    path("api/v1/", api_v1_urls()),
    path("admin/", admin.site.urls),
    path("ops/", include("ops.urls")),
    path("", include("billing.urls")),  # usage, teams and budgets, invitations (namespace "billing")
    path("", include("presets.urls")),  # presets, "Rent again" and capacity watches (namespace "presets")
]
