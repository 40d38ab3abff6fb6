"""URL configuration: customer pages under /, the admin under /admin/, probes at the root."""

from django.contrib import admin
from django.urls import include, path

from api.urls import api_v1_urls
from dashboard import views
from dashboard.metrics import metrics_view

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("profile/api-keys/", include("api.urls")),
    path("profile/", include("accounts.urls")),
    path("api/v1/", api_v1_urls()),
    path("admin/", admin.site.urls),
    path("ops/", include("ops.urls")),
    path("", include("rentals.urls")),
]
