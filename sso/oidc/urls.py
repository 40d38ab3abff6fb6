"""allauth includes these (through the provider's `package`) under its own prefix: /accounts/sso/…"""

from django.urls import path

from sso.oidc import views

urlpatterns = [
    path("sso/<str:provider_id>/login/", views.login, name="sso_login"),
    path("sso/<str:provider_id>/login/callback/", views.callback, name="sso_callback"),
]
