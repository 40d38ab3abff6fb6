"""Profile pages (included at /profile/): the user's saved SSH keys."""

from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("ssh-keys/", views.ssh_keys, name="ssh_keys"),
    path("ssh-keys/<int:pk>/delete/", views.ssh_key_delete, name="ssh_key_delete"),
]
