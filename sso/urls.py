"""SSO pages: a customer's provider settings, and "sign in with your company" (namespace "sso")."""

from django.urls import path

from sso import views

app_name = "sso"

urlpatterns = [
    path("customers/<int:customer_id>/sso/", views.sso_config, name="config"),
    path("customers/<int:customer_id>/sso/remove/", views.sso_config_remove, name="config_remove"),
    path("accounts/sso/", views.sso_start, name="start"),
]
