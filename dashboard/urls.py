"""URL configuration: customer pages under /, the admin under /admin/, probes at the root."""

from allauth.account import views as account_views
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from django.views.generic import RedirectView

from api.urls import api_v1_urls
from dashboard import views
from dashboard.metrics import metrics_view

urlpatterns = [
    # First: the customer pages, whose first pattern is the URL open rental pages poll all day (Django tries
    # the patterns in order).
    path("", include("rentals.web.urls")),
    # Home sends people to where they work: the fabrics to rent from.
    path("", login_required(RedirectView.as_view(pattern_name="rentals:fabric_list")), name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    # Sign-in, e-mail, password reset, two-factor and sessions are django-allauth's; the old names stay for
    # the links and bookmarks that use them.
    path("accounts/login/", account_views.login, name="login"),
    path("accounts/logout/", account_views.logout, name="logout"),
    path(
        "accounts/password_change/",
        RedirectView.as_view(pattern_name="account_change_password"),
        name="password_change",
    ),
    path("accounts/", include("allauth.urls")),
    path("profile/api-keys/", include("api.urls")),
    path("profile/", include("accounts.urls")),
    path("profile/", include("notifications.urls")),
    path("api/v1/", api_v1_urls()),
    path("admin/", admin.site.urls),
    path("ops/", include("ops.urls")),
    path("", include("billing.urls")),  # usage, teams and budgets, invitations (namespace "billing")
    path("", include("presets.urls")),  # presets, "Rent again" and capacity watches (namespace "presets")
    path("", include("sso.urls")),  # a customer's single sign-on, "sign in with your company" (namespace "sso")
]

# A database lost outside any view answers 503 with Retry-After, like one lost inside a view.
handler500 = "dashboard.views.server_error"
