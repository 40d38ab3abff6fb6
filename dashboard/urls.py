"""URL configuration: customer pages under /, the admin under /admin/, probes at the root."""

from django.contrib import admin
from django.urls import include, path

from dashboard import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("profile/", include("accounts.urls")),
    path("admin/", admin.site.urls),
    path("", include("rentals.urls")),
]
