"""Staff pages (included at /ops/): overview, search, a rental's timeline and actions, usage, audit."""

from django.urls import path

from ops import views

app_name = "ops"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("panel/", views.overview_panel, name="overview_panel"),
    path("search/", views.search, name="search"),
    path("rentals/<uuid:public_id>/", views.rental_timeline, name="rental"),
    path("rentals/<uuid:public_id>/<slug:action>/", views.rental_action, name="rental_action"),
    path("usage/", views.usage, name="usage"),
    path("usage.csv", views.usage_csv, name="usage_csv"),
    path("audit/", views.audit, name="audit"),
    path("pod-events/", views.pod_events, name="pod_events"),
]
