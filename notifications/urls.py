"""Profile pages (included at /profile/): webhook endpoints with their delivery log, e-mail preferences."""

from django.urls import path

from notifications import views

app_name = "notifications"

urlpatterns = [
    path("webhooks/", views.webhook_list, name="webhook_list"),
    path("webhooks/<int:pk>/", views.webhook_detail, name="webhook_detail"),
    path("webhooks/<int:pk>/test/", views.webhook_test, name="webhook_test"),
    path("webhooks/<int:pk>/delete/", views.webhook_delete, name="webhook_delete"),
    path(
        "webhooks/<int:pk>/deliveries/<int:delivery_pk>/redeliver/",
        views.webhook_redeliver,
        name="webhook_redeliver",
    ),
    path("notifications/", views.notification_preferences, name="preferences"),
]
